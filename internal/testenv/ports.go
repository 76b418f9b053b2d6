package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

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
