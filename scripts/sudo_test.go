package scripts

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"kubelet-labs/internal/critest"
)

// learnerEnvVar names the unprivileged user in sudoers CI types the root
// commands as (internal/readmerun's UserEnvVar; .ci/run makes the user).
const learnerEnvVar = "LABS_README_USER"

// asLearner runs script (bash) as the learner, in a login environment: Go
// where the go.dev install puts it, nothing of this process's.
func asLearner(t *testing.T, dir, script string) (string, error) {
	t.Helper()
	name := os.Getenv(learnerEnvVar)
	critest.Require(t, name != "", "%s names no user in sudoers to type sudo as (CI makes one)", learnerEnvVar)
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("runuser", "-u", name, "--", "env", "-i", "HOME="+u.HomeDir, "USER="+name, "LOGNAME="+name,
		"PATH=/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin", "bash", "-c", script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The bug a learner met (issue 36): Go installed the usual way, in
// /usr/local/go, and `sudo scripts/containerd-up.sh` said Go was missing —
// sudo resets PATH to its secure_path, which has no /usr/local/go/bin.
// Typed by a learner through real sudo, with the distribution's sudoers,
// the build finds a root-owned Go anyway, from a folder whose go.mod asks
// for a toolchain that does not exist (nothing of the folder sudo was
// typed in reaches root's go).
func TestSudoFindsGo(t *testing.T) {
	requireRoot(t)
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// the precondition that makes this test mean something: the learner's
	// sudo resets PATH the way a stock distribution does
	out, err := asLearner(t, "/", "sudo -n sh -c 'echo \"$PATH\"; command -v go || true'")
	if err != nil {
		t.Fatalf("the learner cannot sudo without a password (CI puts them in sudoers): %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) > 1 {
		critest.Require(t, false, "sudo's PATH here (%s) finds a go (%s): this machine's sudo does not reset PATH as Debian's does, so this test proves nothing", lines[0], lines[1])
	}

	hostile := t.TempDir()
	os.WriteFile(filepath.Join(hostile, "go.mod"), []byte("module hostile\n\ngo 1.99.0\n\ntoolchain go1.99.0\n"), 0o644)
	os.Chmod(hostile, 0o755)
	out, err = asLearner(t, hostile, "GOTOOLCHAIN=auto sudo -n "+repo+"/scripts/build-containerd.sh --which-go")
	if err != nil {
		t.Fatalf("sudo scripts/build-containerd.sh --which-go, as the learner: %v\n%s", err, out)
	}
	goBin := strings.TrimSpace(out)
	if err := exec.Command("bash", "-c", `source containerd/lib.sh; check_root_owned "$1"`, "_", goBin).Run(); err != nil || !filepath.IsAbs(goBin) {
		t.Errorf("the Go root would build with, %q, is not a root-owned program: %v", goBin, err)
	}
	t.Logf("under sudo (PATH %s), root builds containerd with %s", lines[0], goBin)
}

// find_go, run as root with sudo's PATH: the Go this test runs with, if it
// is root's; a Go too old or not root's is refused, saying why and what to
// type.
func TestFindGo(t *testing.T) {
	requireRoot(t)
	find := func(env ...string) (string, error) {
		cmd := exec.Command("bash", "-c", `source containerd/lib.sh; find_go`)
		cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, env...)
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if goBin, err := exec.LookPath("go"); err == nil && strings.HasPrefix(goBin, "/usr/local/go/") {
		if out, err := find(); err != nil || out != "/usr/local/go/bin/go" {
			t.Errorf("find_go with sudo's PATH: %v %q, want /usr/local/go/bin/go", err, out)
		}
	}
	dir := t.TempDir()
	old := filepath.Join(dir, "old", "go")
	os.MkdirAll(filepath.Dir(old), 0o755)
	os.WriteFile(old, []byte("#!/bin/sh\necho go1.19.8\n"), 0o755)
	mine := filepath.Join(dir, "mine", "go")
	os.MkdirAll(filepath.Dir(mine), 0o755)
	os.WriteFile(mine, []byte("#!/bin/sh\necho go1.26.8\n"), 0o755)
	os.Chown(filepath.Dir(mine), nobody, nobody)
	for _, c := range []struct{ goBin, want string }{
		{old, "older than go1.25.0"},
		{mine, "belongs to uid 65534"},
		{filepath.Join(dir, "none"), "no such file"},
	} {
		out, err := find("LABS_GO=" + c.goBin)
		if err == nil || !strings.Contains(out, c.want) || !strings.Contains(out, "sudo scripts/containerd-up.sh --version 1.6") {
			t.Errorf("find_go with LABS_GO=%s: %v\n%s\nwant a refusal saying %q and what to type", c.goBin, err, out, c.want)
		}
	}
}

// Nothing of the folder sudo is typed in reaches root's go: a go.mod there
// that asks for a toolchain made go switch (and fetch it) before the
// script had even seen that containerd was built (issue 36). Run from
// such a folder, the build says containerd is built and touches no Go.
func TestBuildIgnoresTheFolderItRunsIn(t *testing.T) {
	requireRoot(t)
	out, err := exec.Command("bash", "-c", `source containerd/lib.sh; echo "$CONTAINERD2_BIN_DIR"`).Output()
	if err != nil {
		t.Fatal(err)
	}
	bin := strings.TrimSpace(string(out))
	_, err = os.Stat(filepath.Join(bin, "containerd"))
	critest.Require(t, err == nil, "containerd is not built in %s (sudo scripts/build-containerd.sh)", bin)
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	hostile := t.TempDir()
	os.WriteFile(filepath.Join(hostile, "go.mod"), []byte("module hostile\n\ngo 1.99.0\n\ntoolchain go1.99.0\n"), 0o644)
	cmd := exec.Command(filepath.Join(repo, "scripts", "build-containerd.sh"))
	cmd.Dir = hostile
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=auto", "GOFLAGS=-toolexec=/nonexistent")
	got, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(got), "already built") {
		t.Errorf("build-containerd.sh from a folder whose go.mod wants go1.99.0: %v\n%s\nwant: already built", err, got)
	}
}
