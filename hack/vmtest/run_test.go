// Package vmtest tests hack/vmtest/run.sh (make vm-test) without booting
// anything: that root refuses a work folder another user could change
// before it runs a single command, and that the scripts are
// shellcheck-clean. The VM test itself takes an hour and is run by hand.
package vmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// nobody stands for any other local user.
const nobody = 65534

// stubbed are the commands run.sh runs first once its checks pass, each
// replaced by a stub that writes its name to a log and fails: whatever
// run.sh does, the test installs no package, builds nothing and adds no
// user, and the log shows whether run.sh got past its checks.
var stubbed = []string{"apt-get", "dpkg-query", "go", "useradd", "runuser", "git", "limactl", "kind"}

// runScript runs run.sh as root with VMTEST_DIR=dir and the stubs first in
// PATH; it returns the output, the error and the stubs that ran.
func runScript(t *testing.T, dir string) (string, error, string) {
	t.Helper()
	stubs := t.TempDir()
	log := filepath.Join(stubs, "ran.log")
	for _, name := range stubbed {
		body := "#!/bin/sh\necho " + name + " >>" + log + "\nexit 97\n"
		if err := os.WriteFile(filepath.Join(stubs, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("./run.sh")
	cmd.Env = append(os.Environ(), "PATH="+stubs+":"+os.Getenv("PATH"), "VMTEST_DIR="+dir, "VMTEST_USER=nobody")
	out, err := cmd.CombinedOutput()
	ran, _ := os.ReadFile(log)
	return string(out), err, strings.TrimSpace(string(ran))
}

// Root runs limactl and kind from its work folder and writes its image
// there: a folder another user owns or can write, or a symbolic link,
// would let them swap those for their own programs. run.sh refuses it
// before anything runs; a new folder it makes root's, 0755 (the VM's user
// reads limactl and the seed), and marks as its own.
func TestWorkFolderMustBeRoots(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("run.sh runs as root, and so must this test")
	}
	base := t.TempDir() // root's, 0700, under the sticky /tmp
	mk := func(name string, mode os.FileMode, uid int) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
		return p
	}
	others := mk("others", 0o755, nobody)
	shared := mk("shared", 0o777, 0)
	link := filepath.Join(base, "link")
	if err := os.Symlink(mk("roots", 0o755, 0), link); err != nil {
		t.Fatal(err)
	}
	used := mk("used", 0o755, 0)
	if err := os.WriteFile(filepath.Join(used, "limactl"), nil, 0o755); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct{ name, dir, want string }{
		{"another user's folder", others, "belongs to uid 65534"},
		{"in another user's folder", filepath.Join(others, "vmtest"), "belongs to uid 65534"},
		{"in a folder all can write", filepath.Join(shared, "vmtest"), "writable by users other than root"},
		{"a symbolic link", link, "is a symbolic link"},
		{"a folder run.sh did not make", used, "was not made by hack/vmtest/run.sh"},
		{"shell-special characters", filepath.Join(base, "a b"), "only letters, digits"},
	} {
		out, err, ran := runScript(t, c.dir)
		if err == nil || !strings.Contains(out, "VMTEST_DIR") || !strings.Contains(out, c.want) {
			t.Errorf("%s (VMTEST_DIR=%s): %v\n%s\nwant a refusal naming VMTEST_DIR and saying %q", c.name, c.dir, err, out, c.want)
		}
		if ran != "" {
			t.Errorf("%s (VMTEST_DIR=%s): run.sh ran %q before refusing, want nothing run", c.name, c.dir, ran)
		}
	}
	if entries, _ := os.ReadDir(others); len(entries) != 0 {
		t.Errorf("root wrote into the other user's folder: %v", entries)
	}

	// A new folder: made root's and 0755, marked, and run.sh goes on (to
	// its first stub).
	fresh := filepath.Join(base, "new", "vmtest")
	out, _, ran := runScript(t, fresh)
	fi, err := os.Stat(fresh)
	if err != nil {
		t.Fatalf("VMTEST_DIR=%s was not made: %v\n%s", fresh, err, out)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || fi.Mode().Perm() != 0o755 {
		t.Errorf("VMTEST_DIR=%s: uid %d mode %v, want root's, 0755 (root writes, the VM's user reads)", fresh, st.Uid, fi.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(fresh, ".kubelet-labs-vmtest")); err != nil {
		t.Errorf("the new work folder is not marked as run.sh's: %v\n%s", err, out)
	}
	if ran == "" {
		t.Errorf("run.sh stopped at a work folder it made itself:\n%s", out)
	}
}
