package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"kubelet-labs/internal/controlplane"
)

// AssertGone fails the test if any of pids (component name → pid) is still
// running after a grace of 20 s, or still listens on one of ports. A port
// in use by someone else is not a leak: another test may have picked the
// same free port since.
func AssertGone(tb testing.TB, pids map[string]int, ports []int) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for name, pid := range pids {
		for controlplane.ProcessRunning(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if controlplane.ProcessRunning(pid) {
			tb.Errorf("%s (pid %d) is still running", name, pid)
		}
	}
	ours := map[int]string{}
	for name, pid := range pids {
		ours[pid] = name
	}
	for _, port := range ports {
		for _, pid := range ListeningPids(port) {
			if name, ok := ours[pid]; ok {
				tb.Errorf("%s (pid %d) still listens on port %d", name, pid, port)
			}
		}
	}
}

// ListeningPids returns the processes that listen on a TCP port (any
// address). Tests use it to tell "our component still holds its port"
// from "another test took the same free port a moment later".
func ListeningPids(port int) []int {
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			fields := strings.Fields(line)
			// sl local_address rem_address st ... inode is field 9
			if len(fields) < 10 || fields[3] != "0A" { // 0A = LISTEN
				continue
			}
			i := strings.LastIndexByte(fields[1], ':')
			p, err := strconv.ParseInt(fields[1][i+1:], 16, 32)
			if err == nil && int(p) == port {
				inodes[fmt.Sprintf("socket:[%s]", fields[9])] = true
			}
		}
	}
	if len(inodes) == 0 {
		return nil
	}
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, proc := range procs {
		fds, _ := os.ReadDir(filepath.Join(proc, "fd"))
		for _, fd := range fds {
			target, err := os.Readlink(filepath.Join(proc, "fd", fd.Name()))
			if err == nil && inodes[target] {
				pid, _ := strconv.Atoi(filepath.Base(proc))
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}
