package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"kubelet-labs/internal/critest"
	"kubelet-labs/internal/labruntime"
)

// nobody stands for the learner: a user who is not root.
const nobody = 65534

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the scripts under test run as root, and so must the test (CI does)")
	}
}

// run runs a bash snippet with the scripts' library sourced.
func libCheck(t *testing.T, path string) (string, error) {
	t.Helper()
	out, err := exec.Command("bash", "-c", `set -euo pipefail; source containerd/lib.sh; check_root_owned "$1"`, "_", path).CombinedOutput()
	return string(out), err
}

// Root's tree must be root's all the way down: a folder another user owns
// or can write, a symlink, or a path with shell-special characters is
// refused before root creates or reads anything there.
func TestRootTreeIsRootsAllTheWayDown(t *testing.T) {
	requireRoot(t)
	base := t.TempDir() // root's, 0700, under the sticky /tmp: fine
	mk := func(name string, mode os.FileMode, uid int) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		os.Chown(p, uid, uid)
		return p
	}
	learners := mk("learner", 0o755, nobody)
	shared := mk("shared", 0o777, 0)
	link := filepath.Join(base, "link")
	os.Symlink(mk("roots", 0o711, 0), link)

	if out, err := libCheck(t, filepath.Join(base, "kubelet-labs")); err != nil {
		t.Errorf("a new folder in root's own folder is refused: %v\n%s", err, out)
	}
	for _, c := range []struct{ path, want string }{
		{filepath.Join(learners, "kubelet-labs"), "belongs to uid 65534"},
		{filepath.Join(shared, "kubelet-labs"), "writable by users other than root"},
		{filepath.Join(link, "kubelet-labs"), "is a symbolic link"},
		{filepath.Join(base, "it's"), "only letters, digits"},
		{"relative/path", "want an absolute path"},
	} {
		out, err := libCheck(t, c.path)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("check_root_owned %s: %v\n%s\nwant a refusal saying %q", c.path, err, out, c.want)
		}
	}

	// The scripts refuse such a tree before doing anything: build-containerd.sh
	// would otherwise build (and up run) binaries the learner can swap.
	for _, script := range []string{"./build-containerd.sh", "./containerd-up.sh", "./containerd-down.sh"} {
		tree := filepath.Join(learners, "tree")
		os.Mkdir(tree, 0o755)
		os.Chown(tree, nobody, nobody)
		cmd := exec.Command(script)
		cmd.Env = append(os.Environ(), "LABS_ROOT_DIR="+tree, "LABS_NO_INSTALL=1")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "belongs to uid 65534") {
			t.Errorf("%s with LABS_ROOT_DIR=%s (the learner's): %v\n%s\nwant a refusal", script, tree, err, out)
		}
		if entries, _ := os.ReadDir(tree); len(entries) != 0 {
			t.Errorf("%s wrote into the learner's folder: %v", script, entries)
		}
	}
}

// The attack the issue found: a learner's process plants, in the state
// folder it owns, a symlink where root used to take a lock (root would
// truncate /etc/shadow), a fake containerd where root used to run it, and a
// redirect of the folder root used to rm -rf in. Run with that state
// folder, containerd-up.sh follows none of them: it never looks there.
func TestUpTrustsNothingInTheLearnersStateFolder(t *testing.T) {
	requireRoot(t)
	started, err := labruntime.StartedFlavours()
	if err != nil {
		t.Fatal(err)
	}
	critest.Require(t, len(started) > 0, "no containerd of ours runs (start it with %s); this test re-runs it on the same config", labruntime.UpHint)
	def, err := labruntime.Load()
	if err != nil {
		t.Fatal(err)
	}
	// the same flavours, default first, and the same learner: up reuses the
	// running containerd instead of restarting it under other tests
	flavours := []string{def.Flavour}
	for _, f := range started {
		if f != def.Flavour {
			flavours = append(flavours, f)
		}
	}
	uid, gid := socketOwner(t, def.Flavour)

	victim := filepath.Join(t.TempDir(), "shadow")
	os.WriteFile(victim, []byte("root:secret\n"), 0o600)
	ran := filepath.Join(t.TempDir(), "fake-containerd-ran")
	state := filepath.Join(t.TempDir(), "learners-state")
	bin := filepath.Join(state, "bin", "containerd-v2.2.9")
	os.MkdirAll(bin, 0o755)
	os.Symlink(victim, filepath.Join(state, "bin", ".containerd-build.lock"))
	for _, p := range []string{"containerd", "ctr", "containerd-shim-runc-v2"} {
		os.WriteFile(filepath.Join(bin, p), []byte("#!/bin/sh\ntouch "+ran+"\n"), 0o755)
	}
	os.Symlink(filepath.Dir(victim), filepath.Join(state, "containerd"))
	filepath.Walk(state, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, nobody, nobody) })

	cmd := exec.Command("./containerd-up.sh", "--version", strings.Join(flavours, ","))
	cmd.Env = append(os.Environ(), "LABS_STATE_DIR="+state, "SUDO_UID="+uid, "SUDO_GID="+gid, "LABS_NO_INSTALL=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("containerd-up.sh: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "reusing it") {
		t.Errorf("containerd-up.sh restarted containerd instead of reusing it:\n%s", out)
	}
	if data, _ := os.ReadFile(victim); string(data) != "root:secret\n" {
		t.Errorf("root changed the file a planted symlink named: %q", data)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("root ran the containerd the learner planted in the state folder")
	}
	if strings.Contains(string(out), state) {
		t.Errorf("containerd-up.sh used the learner's state folder %s:\n%s", state, out)
	}
}

// socketOwner is the uid and gid containerd-up.sh handed flavour's socket to.
func socketOwner(t *testing.T, flavour string) (string, string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(labruntime.RootDir(), "containerd", flavour, "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	uid := regexp.MustCompile(`(?m)^\s*uid = (\d+)$`).FindStringSubmatch(string(data))
	gid := regexp.MustCompile(`(?m)^\s*gid = (\d+)$`).FindStringSubmatch(string(data))
	if uid == nil || gid == nil {
		t.Fatalf("no [grpc] uid/gid in %s's config", flavour)
	}
	return uid[1], gid[1]
}
