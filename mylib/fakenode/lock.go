package fakenode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// lockNode makes sure one process at a time runs a node from its folder.
// Two kubelets with one name would fight over the Node, the Lease, the
// certificates and the mock CRI's socket; the second one is refused with
// the first one's pid. The lock is an flock(2) on Dir/node.lock, held for
// the life of the process (a node lives as long as its process): the kernel
// drops it when the process dies, even by kill -9, so a crashed run never
// blocks the next one.
func lockNode(dir, name string) (*os.File, error) {
	path := filepath.Join(dir, "node.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("node lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			owner := "?"
			if data, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(data)) != "" {
				owner = strings.TrimSpace(string(data))
			}
			return nil, &AlreadyRunningError{NodeName: name, Dir: dir, Pid: owner}
		}
		return nil, fmt.Errorf("node lock %s: %w", path, err)
	}
	// Ours now: record who holds it, for the message above.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// heldLocks keeps the locks of started nodes referenced until the process
// exits: a collected *os.File would close its descriptor and drop the lock.
var (
	heldMu    sync.Mutex
	heldLocks []*os.File
)

func holdForever(f *os.File) {
	heldMu.Lock()
	defer heldMu.Unlock()
	heldLocks = append(heldLocks, f)
}

// AlreadyRunningError: another process runs this node from the same folder.
type AlreadyRunningError struct {
	NodeName, Dir, Pid string
}

func (e *AlreadyRunningError) Error() string {
	return fmt.Sprintf("node %s is already running from %s (pid %s): stop it first (Ctrl-C in its terminal, or kill %s), or start another node with another name",
		e.NodeName, e.Dir, e.Pid, e.Pid)
}
