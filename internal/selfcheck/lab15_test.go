package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kubelet-labs/internal/state"
)

// TestStopRecord: lab 15's record as the lab writes it (record.go) is
// done; a missing one, and a run whose stubborn exited 143, are not yet.
func TestStopRecord(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(state.EnvVar, dir)
	e := &Env{}
	if r := stopRecord(e, "mock", "go run ./labs/15-stop-escalation"); r.Done || !strings.Contains(r.Hint, "go run ./labs/15-stop-escalation") {
		t.Errorf("no record: %+v, want not yet with the command", r)
	}
	write := func(text string) {
		if err := os.MkdirAll(filepath.Join(dir, "15-stop-escalation"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "15-stop-escalation", "last-run-mock.txt"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	good := "# lab 15 on fakecri v0.1.0, 2026-11-26T14:00:00Z: how each stop ended (make check LAB=15 reads this)\n" +
		"part 1 polite exit 143 grace 3s took 0.001s\npart 1 stubborn exit 137 grace 3s took 3.002s\n" +
		"part 2 polite exit 143 grace 2s took 0.001s\npart 2 stubborn exit 137 grace 2s took 2.003s\n"
	write(good)
	if r := stopRecord(e, "mock", ""); !r.Done || !strings.Contains(r.What, "part 1 polite 143, stubborn 137 after 3.0s (grace 3s); part 2") {
		t.Errorf("a good run: %+v", r)
	}
	write(strings.Replace(good, "part 2 stubborn exit 137", "part 2 stubborn exit 143", 1))
	if r := stopRecord(e, "mock", ""); r.Done || !strings.Contains(r.What, "part 2: polite exited 143 and stubborn 143") {
		t.Errorf("stubborn 143: %+v, want not yet", r)
	}
}

// TestKillRecord: lab 16's record of a good run is two results done.
func TestKillRecord(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(state.EnvVar, dir)
	if err := os.MkdirAll(filepath.Join(dir, "16-kill-pod"), 0o700); err != nil {
		t.Fatal(err)
	}
	rec := "# lab 16 on fakecri v0.1.0, 2026-11-26T14:00:00Z: what KillPod and the garbage collector did (make check LAB=16 reads this)\n" +
		"killpod took 3.006s grace 3s containers 3\n" +
		"result KillContainer two ok\nresult KillContainer one ok\nresult KillContainer three ok\nresult KillPodSandbox 3a4f-uid ok\n" +
		"exit one 137\nexit three 137\nexit two 137\n" +
		"gc removed 3 containers 1 sandboxes 1 logdirs, left 0, object there true\nobject gone true\n"
	if err := os.WriteFile(filepath.Join(dir, "16-kill-pod", "last-run-mock.txt"), []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	rs := killRecord(&Env{}, "mock", "go run ./labs/16-kill-pod")
	if len(rs) != 2 || !rs[0].Done || !rs[1].Done {
		t.Errorf("a good run: %+v", rs)
	}
	if rs := killRecord(&Env{}, "containerd", "go run ./labs/16-kill-pod --runtime containerd"); len(rs) != 1 || rs[0].Done {
		t.Errorf("no containerd run: %+v, want one not yet", rs)
	}
}
