package readmerun

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestSweepStaleSessions: a session whose test died has its programs
// killed and its folder removed; a live session (lock held) is left alone.
func TestSweepStaleSessions(t *testing.T) {
	tmp := t.TempDir()
	start := func(dir string) *exec.Cmd {
		if err := os.MkdirAll(filepath.Join(dir, "kubelet-labs"), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sleep", "60")
		cmd.Dir = filepath.Join(dir, "kubelet-labs")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	dead, live := filepath.Join(tmp, "readme-dead"), filepath.Join(tmp, "readme-live")
	orphan, running := start(dead), start(live)
	if err := os.WriteFile(filepath.Join(dead, sessionLock), nil, 0o600); err != nil {
		t.Fatal(err) // a lock file nobody holds: its owner died
	}
	lock, err := lockSession(live)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()

	swept := sweepStaleSessions(tmp)
	if len(swept) != 1 || swept[0] != dead {
		t.Fatalf("swept %v, want only %s", swept, dead)
	}
	exited := make(chan error, 1)
	go func() { exited <- orphan.Wait() }()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the dead session's program still runs")
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("%s is still there (%v)", dead, err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the live session's folder: %v", err)
	}
	if running.Process.Signal(syscall.Signal(0)) != nil {
		t.Errorf("the live session's program was ended")
	}
}
