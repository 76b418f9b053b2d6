package fleetmode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunDirRemovesOnlyAbandonedRuns: a fleet killed without its clean-up
// leaves its pod-log folder; the next fleet removes it, and never the
// folder of a fleet still running.
func TestRunDirRemovesOnlyAbandonedRuns(t *testing.T) {
	base := t.TempDir()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	alive := exec.Command("sleep", "60")
	if err := alive.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = alive.Process.Kill(); _ = alive.Wait() })

	abandoned := filepath.Join(base, fmt.Sprintf("run-%d-123", gone.Process.Pid))
	running := filepath.Join(base, fmt.Sprintf("run-%d-456", alive.Process.Pid))
	oldName := filepath.Join(base, "run-789")
	for _, d := range []string{abandoned, running, oldName} {
		if err := os.MkdirAll(filepath.Join(d, "pod"), 0o700); err != nil {
			t.Fatal(err)
		}
	}

	dir, err := newRunDir(base)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(dir), fmt.Sprintf("run-%d-", os.Getpid())) {
		t.Errorf("new run folder %s is not named after this process", dir)
	}
	if _, err := os.Stat(abandoned); !os.IsNotExist(err) {
		t.Errorf("%s (its process has exited) is still there: %v", abandoned, err)
	}
	for _, d := range []string{running, oldName, dir} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was removed: %v", d, err)
		}
	}
}
