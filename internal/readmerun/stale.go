package readmerun

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// A session's folder holds sessionLock, flock(2)-locked while the test
// process that made it lives. The kernel drops the lock when that process
// dies, even by SIGKILL (go test's -timeout, an impatient Ctrl-\), while the
// programs it left in the background — lab 00's control plane on :6443 —
// live on and would make the next run's lab 00 fail. The next session
// finds such folders and ends what still runs in them.
const sessionLock = "session.lock"

// lockSession takes the folder's lock for this process's life: the file
// is opened close-on-exec, so no child holds it after this process dies.
func lockSession(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, sessionLock), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// sweepStaleSessions kills the processes left running in the session
// folders (readme-* under tmp) whose owner died, and removes the folders.
// A folder without a lock file that is under a minute old is a session
// being made now; it is left alone.
func sweepStaleSessions(tmp string) (swept []string) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, "readme-*"))
	for _, dir := range dirs {
		f, err := os.OpenFile(filepath.Join(dir, sessionLock), os.O_RDWR, 0)
		if errors.Is(err, os.ErrNotExist) {
			if info, err := os.Stat(dir); err != nil || time.Since(info.ModTime()) < time.Minute {
				continue
			}
		} else if err != nil {
			continue // not ours to judge (another user's)
		} else {
			busy := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil
			f.Close()
			if busy {
				continue // its test is still running
			}
		}
		killProcessesIn(dir)
		if os.RemoveAll(dir) == nil {
			swept = append(swept, dir)
		}
	}
	return swept
}

// killProcessesIn SIGKILLs every process whose working directory is dir
// or below it: the session runs every command in its copy of the
// checkout, and what those commands start inherits that directory.
func killProcessesIn(dir string) {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		cwd, err := os.Readlink(filepath.Join(p, "cwd"))
		if err != nil || cwd != dir && !strings.HasPrefix(cwd, dir+"/") {
			continue
		}
		var pid int
		if _, err := fmt.Sscan(filepath.Base(p), &pid); err == nil && pid != os.Getpid() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
