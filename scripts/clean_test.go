package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// cleanState runs `make clean` as the README says, with LABS_STATE_DIR=dir.
func cleanState(t *testing.T, dir string) (string, int) {
	t.Helper()
	cmd := exec.Command("make", "--no-print-directory", "-C", "..", "clean")
	cmd.Env = append(os.Environ(), "LABS_STATE_DIR="+dir)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// A folder without the labs' marker is someone's folder: make clean leaves
// it, whatever LABS_STATE_DIR says.
func TestCleanRefusesAFolderTheLabsDidNotMake(t *testing.T) {
	home := t.TempDir() // LABS_STATE_DIR=$HOME, by mistake
	os.WriteFile(filepath.Join(home, "thesis.tex"), []byte("years of work"), 0o600)
	out, code := cleanState(t, home)
	if code == 0 || !strings.Contains(out, ".kubelet-labs-state") {
		t.Errorf("make clean on an unmarked folder: exit %d\n%s\nwant a refusal naming the marker", code, out)
	}
	if _, err := os.Stat(filepath.Join(home, "thesis.tex")); err != nil {
		t.Errorf("make clean deleted an unmarked folder's files: %v", err)
	}

	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(home, link)
	if out, code := cleanState(t, link); code == 0 || !strings.Contains(out, "not a folder") {
		t.Errorf("make clean on a symlink: exit %d\n%s", code, out)
	}
}

// A marked folder goes — unless something of the labs holds a lock in it.
func TestCleanRemovesAMarkedFolderNotInUse(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	os.MkdirAll(filepath.Join(state, "cluster"), 0o700)
	os.WriteFile(filepath.Join(state, ".kubelet-labs-state"), nil, 0o600)
	lockPath := filepath.Join(state, "cluster", "run.lock")
	lock, err := os.Create(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	out, code := cleanState(t, state)
	if code == 0 || !strings.Contains(out, "cluster/run.lock is locked") {
		t.Errorf("make clean while lab 00's lock is held: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(lockPath); err != nil {
		t.Errorf("make clean removed a folder in use: %v", err)
	}

	syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	out, code = cleanState(t, state)
	if code != 0 || !strings.Contains(out, "removed "+state) {
		t.Errorf("make clean on a marked folder: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", state, err)
	}
	if out, code := cleanState(t, state); code != 0 || !strings.Contains(out, "nothing to remove") {
		t.Errorf("make clean twice: exit %d\n%s", code, out)
	}
}
