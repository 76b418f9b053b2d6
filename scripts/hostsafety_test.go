package scripts

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// runScript runs one of the root scripts with extra environment and says
// what it printed and whether it failed.
func runScript(t *testing.T, env []string, script string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(script, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

var tempUsers int

// tempUser adds a user for one test (useradd ARGS… NAME) and removes it
// at the end; it returns the user.
func tempUser(t *testing.T, args ...string) *user.User {
	t.Helper()
	tempUsers++
	name := fmt.Sprintf("kltest%d-%d", os.Getpid(), tempUsers)
	if out, err := exec.Command("useradd", append(args, "--no-create-home", name)...).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v\n%s", name, err, out)
	}
	t.Cleanup(func() { exec.Command("userdel", name).Run() })
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// The socket is root on this machine, and containerd-up.sh hands it (and
// the pod logs) to the user who ran sudo and to their group: a group others
// are in (`useradd -g workshop`, LDAP's "domain users") would give it to
// all of them. Up refuses such a group before it makes anything; a group
// of one (useradd's default) passes.
func TestSocketGoesToTheLearnerAlone(t *testing.T) {
	requireRoot(t)
	shared := tempUser(t, "--no-user-group", "--gid", "users")
	alone := tempUser(t, "--user-group")
	tree := filepath.Join(t.TempDir(), "kubelet-labs")
	out, err := runScript(t, []string{"LABS_ROOT_DIR=" + tree, "LABS_NO_INSTALL=1", "SUDO_UID=" + shared.Uid, "SUDO_GID=" + shared.Gid}, "./containerd-up.sh")
	if err == nil || !strings.Contains(out, "is not yours alone") {
		t.Errorf("containerd-up.sh for %s, whose group is users (gid %s): %v\n%s\nwant a refusal: the group is shared", shared.Username, shared.Gid, err, out)
	}
	if _, err := os.Stat(tree); err == nil {
		t.Errorf("containerd-up.sh made %s before refusing", tree)
	}
	check := exec.Command("bash", "-c", `source containerd/lib.sh; check_learner_group "$1" "$2"`, "_", alone.Uid, alone.Gid)
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("check_learner_group for %s, a group of one: %v\n%s", alone.Username, err, out)
	}
}

// LABS_ROOT_DIR names root's tree; a mistake (`/etc`, a home folder) must
// never be written in by up or deleted by down --purge: both want the
// tree's marker, which only up writes, in a folder that was new or empty.
func TestRootTreeMustBeOurs(t *testing.T) {
	requireRoot(t)
	notOurs := filepath.Join(t.TempDir(), "etc")
	os.Mkdir(notOurs, 0o755)
	precious := filepath.Join(notOurs, "shadow")
	os.WriteFile(precious, []byte("root:secret\n"), 0o600)

	out, err := runScript(t, []string{"LABS_ROOT_DIR=" + notOurs}, "./containerd-down.sh", "--purge")
	if err == nil || !strings.Contains(out, ".kubelet-labs-root") {
		t.Errorf("containerd-down.sh --purge with LABS_ROOT_DIR=%s (no marker): %v\n%s\nwant a refusal naming the marker", notOurs, err, out)
	}
	out, err = runScript(t, []string{"LABS_ROOT_DIR=" + notOurs, "LABS_NO_INSTALL=1"}, "./containerd-up.sh")
	if err == nil || !strings.Contains(out, "not made by containerd-up.sh") {
		t.Errorf("containerd-up.sh with LABS_ROOT_DIR=%s (not empty, no marker): %v\n%s\nwant a refusal", notOurs, err, out)
	}
	if data, _ := os.ReadFile(precious); string(data) != "root:secret\n" {
		t.Fatalf("%s was changed or deleted", precious)
	}
	if entries, _ := os.ReadDir(notOurs); len(entries) != 1 {
		t.Errorf("the scripts wrote into a folder that is not theirs: %v", entries)
	}

	// a tree up made (marked) is purged
	ours := filepath.Join(t.TempDir(), "kubelet-labs")
	mark := exec.Command("bash", "-c", `source containerd/lib.sh; make_root_tree`)
	mark.Env = append(os.Environ(), "LABS_ROOT_DIR="+ours)
	if out, err := mark.CombinedOutput(); err != nil {
		t.Fatalf("make_root_tree: %v\n%s", err, out)
	}
	if out, err := runScript(t, []string{"LABS_ROOT_DIR=" + ours}, "./containerd-down.sh", "--purge"); err != nil {
		t.Errorf("containerd-down.sh --purge of a marked tree: %v\n%s", err, out)
	}
	if _, err := os.Stat(ours); err == nil {
		t.Errorf("--purge left the marked tree %s", ours)
	}
}

// LABS_CNI_BRIDGE lands in a CNI config (JSON) and names the link down
// deletes: anything but a short name of letters and digits is refused by
// both scripts before they act.
func TestBridgePrefixIsAName(t *testing.T) {
	requireRoot(t)
	for _, bad := range []string{`x","type":"evil`, "eth0;", "Labs", "averyveryverylongname"} {
		tree := filepath.Join(t.TempDir(), "kubelet-labs")
		for _, script := range []string{"./containerd-up.sh", "./containerd-down.sh"} {
			out, err := runScript(t, []string{"LABS_ROOT_DIR=" + tree, "LABS_NO_INSTALL=1", "LABS_CNI_BRIDGE=" + bad}, script)
			if err == nil || !strings.Contains(out, "is not a bridge name prefix") {
				t.Errorf("%s with LABS_CNI_BRIDGE=%q: %v\n%s\nwant a refusal", script, bad, err, out)
			}
		}
		if _, err := os.Stat(tree); err == nil {
			t.Errorf("LABS_CNI_BRIDGE=%q: a script made %s before refusing", bad, tree)
		}
	}
}

// Root runs runc, containerd, ctr and the CNI plugins it finds: only from
// the system's folders, whatever PATH the root shell had (a folder of the
// learner's first in PATH would give root the learner's runc).
func TestRootFindsProgramsOnlyInSystemFolders(t *testing.T) {
	requireRoot(t)
	planted := t.TempDir()
	for _, p := range []string{"runc", "containerd", "ctr", "go"} {
		os.WriteFile(filepath.Join(planted, p), []byte("#!/bin/sh\nexit 0\n"), 0o755)
	}
	for _, p := range []string{"runc", "go"} {
		cmd := exec.Command("bash", "-c", `source containerd/lib.sh; command -v "$1" || true`, "_", p)
		cmd.Env = append(os.Environ(), "PATH="+planted+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if strings.HasPrefix(string(out), planted) {
			t.Errorf("with %s first in PATH, root's scripts find %s there: %s", planted, p, out)
		}
	}
}

// containerd.log starts anew at each start of containerd, the one before
// kept as containerd.log.1: a log is never longer than two runs.
func TestRotateLogKeepsOneGeneration(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "containerd.log")
	for _, run := range []string{"first run\n", "second run\n", "third run\n"} {
		cmd := exec.Command("bash", "-c", `source containerd/lib.sh; rotate_log "$1"; printf %s "$2" >>"$1"`, "_", log, run)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	cur, _ := os.ReadFile(log)
	prev, _ := os.ReadFile(log + ".1")
	if string(cur) != "third run\n" || string(prev) != "second run\n" {
		t.Errorf("after three runs: containerd.log %q, containerd.log.1 %q; want the third run and the second", cur, prev)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("after three runs the folder holds %d files, want 2", len(entries))
	}
}
