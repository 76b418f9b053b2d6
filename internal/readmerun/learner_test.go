package readmerun

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"kubelet-labs/internal/critest"
)

// requireLearner is the learner CI names (UserEnvVar), for tests that hand
// things to them; it needs root.
func requireLearner(t *testing.T) *learner {
	t.Helper()
	critest.Require(t, os.Geteuid() == 0 && os.Getenv(UserEnvVar) != "", "handing a checkout to a learner needs root and %s (CI sets both)", UserEnvVar)
	l, err := lookupLearner()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// give chowns what is in a folder before the folder, and the checkout's
// parent last: until then the learner cannot reach the tree, so no rename
// of theirs can swap a folder for a symlink under a chown by path.
func TestChownOrderIsChildrenFirst(t *testing.T) {
	top := filepath.Join(t.TempDir(), "kubelet-labs")
	for _, d := range []string{"a/b/c", "a/d", "e"} {
		os.MkdirAll(filepath.Join(top, d), 0o755)
	}
	os.WriteFile(filepath.Join(top, "a/b/c/f"), nil, 0o644)
	os.Symlink("/etc/shadow", filepath.Join(top, "a/link"))
	order, err := chownOrder(top)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for i, p := range order {
		seen[p] = i
	}
	for i, p := range order {
		for q, k := range seen {
			if strings.HasPrefix(q, p+"/") && k > i {
				t.Errorf("%s is chowned after its folder %s", q, p)
			}
		}
	}
	if last := order[len(order)-1]; last != filepath.Dir(top) {
		t.Errorf("the last path chowned is %s, want the checkout's parent %s", last, filepath.Dir(top))
	}
}

// The learner's commands see a learner's login environment, nothing of the
// runner's (root's): no variable of root's, root's HOME, or its Go setup.
func TestLearnerGetsALoginEnvironment(t *testing.T) {
	l := requireLearner(t)
	t.Setenv("KUBELET_LABS_ROOTS_OWN", "secret")
	t.Setenv("GOROOT", "/root/sdk/go")
	t.Setenv("GOFLAGS", "-toolexec=/root/evil")
	s := &Session{Dir: "/", learner: l}
	out, err := s.command("env; echo uid=$(id -u)").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	env := string(out)
	for _, bad := range []string{"KUBELET_LABS_ROOTS_OWN", "GOROOT=", "toolexec", "HOME=/root"} {
		if strings.Contains(env, bad) {
			t.Errorf("the learner's command sees %q from the runner's environment:\n%s", bad, env)
		}
	}
	for _, want := range []string{"HOME=" + l.home + "\n", "USER=" + l.name + "\n", "uid=" + strconv.Itoa(int(l.uid)) + "\n"} {
		if !strings.Contains(env, want) {
			t.Errorf("the learner's environment has no %q:\n%s", strings.TrimSpace(want), env)
		}
	}
}

// The binaries a session starts from are copies the learner owns: root's
// own stay root's (a hard link, chowned, handed the learner the file root
// runs next).
func TestSessionBinariesAreCopies(t *testing.T) {
	requireLearner(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	binDir := t.TempDir()
	orig := filepath.Join(binDir, "kube-apiserver")
	os.WriteFile(orig, []byte("#!/bin/sh\n"), 0o755)
	s := NewSession(t, root, binDir)
	copied := filepath.Join(s.Dir, ".labs", "bin", "kube-apiserver")
	a, err := os.Stat(orig)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.Stat(copied)
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(a, b) {
		t.Errorf("%s is a hard link of root's %s", copied, orig)
	}
	if uid := a.Sys().(*syscall.Stat_t).Uid; uid != 0 {
		t.Errorf("root's %s now belongs to uid %d", orig, uid)
	}
	if u, _ := user.Lookup(os.Getenv(UserEnvVar)); u != nil && strconv.Itoa(int(b.Sys().(*syscall.Stat_t).Uid)) != u.Uid {
		t.Errorf("the learner's copy %s is not theirs", copied)
	}
}

// The Go caches CI gives its learner (.ci/run) are hard links of root's:
// a file with another link must still be root's, or the learner could
// change a file root's go reads next (a chown of a hard link is a chown of
// root's file).
func TestLearnersCachesShareNothingTheyCanChange(t *testing.T) {
	l := requireLearner(t)
	checked := 0
	for _, dir := range []string{filepath.Join(l.home, ".cache", "go-build"), filepath.Join(l.home, "go", "pkg", "mod", "cache", "download")} {
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			fi, err := os.Lstat(p)
			if err != nil {
				return nil
			}
			st := fi.Sys().(*syscall.Stat_t)
			if st.Nlink > 1 && (st.Uid == l.uid || fi.Mode().Perm()&0o022 != 0) {
				t.Errorf("%s has %d links and the learner can change it (uid %d, mode %o)", p, st.Nlink, st.Uid, fi.Mode().Perm())
				return filepath.SkipAll
			}
			checked++
			return nil
		})
	}
	t.Logf("%d files of the learner's Go caches checked", checked)
}
