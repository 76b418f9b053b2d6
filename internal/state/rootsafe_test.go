package state

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// nobody is the uid the tests give folders "another user" owns.
const nobody = 65534

// Run as root (CI), the labs refuse a state folder another user owns or can
// write, and one reached through such a folder or symlink: anything there
// could be a planted static pod, kubeconfig or binary. Root's own folders
// under the sticky /tmp are fine.
func TestCheckRootSafeRefusesWhatAnotherUserCouldChange(t *testing.T) {
	if os.Geteuid() != 0 {
		if err := CheckRootSafe(t.TempDir()); err != nil {
			t.Errorf("as a user, CheckRootSafe = %v, want nil (a learner trusts their own files)", err)
		}
		t.Skip("the refusals apply to root only: run as root (CI does)")
	}
	base := t.TempDir() // root's, 0700, under the sticky /tmp
	mk := func(name string, mode os.FileMode, uid int) string {
		p := filepath.Join(base, name)
		if err := os.MkdirAll(p, 0o700); err != nil {
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
	ok := mk("root", 0o700, 0)
	if err := CheckRootSafe(filepath.Join(ok, "state", "not-yet")); err != nil {
		t.Errorf("root's folder: %v", err)
	}
	// a path under a file is not unsafe, only impossible: Ensure's mkdir
	// says so, naming the state folder and LABS_STATE_DIR
	file := filepath.Join(ok, "a-file")
	os.WriteFile(file, nil, 0o600)
	if err := CheckRootSafe(filepath.Join(file, "state")); err != nil {
		t.Errorf("a path under root's file: %v, want nil", err)
	}
	t.Setenv(EnvVar, filepath.Join(file, "state"))
	if _, err := Ensure(); err == nil || !strings.Contains(err.Error(), "not usable") || !strings.Contains(err.Error(), EnvVar) {
		t.Errorf("Ensure under a file = %v, want \"not usable … %s\"", err, EnvVar)
	}

	learner := mk("learner", 0o755, nobody)
	writable := mk("shared", 0o777, 0)
	link := filepath.Join(base, "link-to-learner")
	os.Symlink(learner, link)
	for _, c := range []struct{ path, want string }{
		{learner, "belongs to uid 65534"},
		{filepath.Join(learner, "state"), "belongs to uid 65534"},
		{filepath.Join(writable, "state"), "writable by users other than root"},
		{filepath.Join(link, "state"), "belongs to uid 65534"},
	} {
		err := CheckRootSafe(c.path)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "running as root") {
			t.Errorf("CheckRootSafe(%s) = %v, want an error saying %q", c.path, err, c.want)
		}
	}

	// Ensure checks before it writes: nothing lands in the learner's folder
	t.Setenv(EnvVar, learner)
	if _, err := Ensure("cluster"); err == nil {
		t.Error("Ensure as root in another user's folder succeeded")
	}
	if entries, _ := os.ReadDir(learner); len(entries) != 0 {
		t.Errorf("root wrote into another user's folder: %v", entries)
	}
}
