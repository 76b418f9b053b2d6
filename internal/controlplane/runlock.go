package controlplane

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The run lock is held by the process that owns the control plane for as
// long as it runs. The pid file lists the children; if it exists while the
// lock is free, the previous owner was killed before it could clean up.

func (cp *ControlPlane) pidFile() string { return filepath.Join(cp.cfg.Dir, "pids") }

func (cp *ControlPlane) writePids() {
	var b strings.Builder
	fmt.Fprintf(&b, "owner %d\n", os.Getpid())
	for name, pid := range cp.Pids() {
		fmt.Fprintf(&b, "%s %d\n", name, pid)
	}
	_ = os.WriteFile(cp.pidFile(), []byte(b.String()), 0o600)
}

func readPids(path string) map[string]int {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	out := map[string]int{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		if pid, err := strconv.Atoi(f[1]); err == nil {
			out[f[0]] = pid
		}
	}
	return out
}

// acquireRunLock makes sure at most one control plane runs per state
// folder, and recovers from a run that was killed (kill -9, a crashed
// test): its children should have died with it (Pdeathsig), but if one of
// our binaries is still alive under a recorded pid, running on this state
// folder, it is killed here. A pid the kernel has since given to anything
// else — another program, or a sibling control plane on another state
// folder — is left alone.
func acquireRunLock(dir, binDir string, progress io.Writer) (*fileLock, error) {
	pidPath := filepath.Join(dir, "pids")
	lock, err := lockFile(filepath.Join(dir, "run.lock"), false)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		owner := readPids(pidPath)["owner"]
		return nil, fmt.Errorf("another control plane is already running on state folder %s (owner pid %d); stop it (Ctrl-C in its terminal, or `kill %d`) or use another folder with LABS_STATE_DIR", dir, owner, owner)
	}
	if err != nil {
		return nil, fmt.Errorf("state folder %s is not usable: %w", dir, err)
	}
	stale := readPids(pidPath)
	if stale == nil {
		return lock, nil
	}
	fmt.Fprintf(progress, "found state of a control plane that did not shut down cleanly (pid file %s); recovering\n", pidPath)
	for name, pid := range stale {
		if name == "owner" || !processAlive(pid) || !isOurBinary(pid, binDir) || !usesStateFolder(pid, dir) {
			continue
		}
		fmt.Fprintf(progress, "killing leftover %s (pid %d)\n", name, pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		// Its ports are free only once it has exited.
		for deadline := time.Now().Add(10 * time.Second); ProcessRunning(pid) && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
	}
	os.Remove(pidPath)
	return lock, nil
}

// ProcessRunning is processAlive minus finished zombies: a killed process
// whose parent has not reaped it yet has released its ports. A zombie
// *leader* of a multi-threaded process (etcd, the apiserver) can show "Z"
// while its other threads still hold the file table, so a process counts
// as gone only when it is a zombie with no open descriptors left.
func ProcessRunning(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) && s[i+2] != 'Z' {
		return true
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return err == nil && len(fds) > 0
}

// isOurBinary guards against killing an unrelated process that reused a pid.
func isOurBinary(pid int, binDir string) bool {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return false
	}
	abs, _ := filepath.Abs(binDir)
	return strings.HasPrefix(exe, abs+string(filepath.Separator))
}

// usesStateFolder guards against the other half of pid reuse: every
// control plane built from one repository runs the same binaries (the
// shared bin folder), so a recorded pid now owned by a sibling control
// plane on another state folder passes isOurBinary. Ours name a path inside
// dir on their command line (etcd's --data-dir, the certificates, the
// kubeconfigs).
func usesStateFolder(pid int, dir string) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	inside := abs + string(filepath.Separator)
	for _, arg := range strings.Split(string(raw), "\x00") {
		if strings.Contains(arg, inside) {
			return true
		}
	}
	return false
}

// InUse reports whether a control plane currently runs on dir (its run lock
// is held). The test harness uses it to sweep folders of killed test runs.
func InUse(dir string) bool {
	l, err := lockFile(filepath.Join(dir, "run.lock"), false)
	if err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	l.Unlock()
	return false
}
