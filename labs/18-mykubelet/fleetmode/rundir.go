package fleetmode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// newRunDir makes this run's folder for its nodes' pod logs under base,
// named after this process (run-PID-…), and first removes the folders of
// runs whose process is gone: a fleet killed with SIGKILL (a benchmark's
// stop after its grace, the OOM killer) cannot remove its own, and at
// 25,000 pods one held 94 MB. A folder whose process still runs, or
// whose name carries no process ID, is left alone.
func newRunDir(base string) (string, error) {
	removeAbandonedRuns(base)
	return os.MkdirTemp(base, fmt.Sprintf("run-%d-", os.Getpid()))
}

func removeAbandonedRuns(base string) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, ok := runPID(e.Name())
		if !ok || !e.IsDir() || pid == os.Getpid() {
			continue
		}
		// Signal 0 checks only that the process exists; EPERM means it
		// does, as another user's.
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(filepath.Join(base, e.Name()))
		}
	}
}

// runPID reads PID from a folder name run-PID-RANDOM.
func runPID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "run-")
	if !ok {
		return 0, false
	}
	p, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(p)
	return pid, err == nil && pid > 0
}
