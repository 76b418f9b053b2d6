package fakecri

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Whoever can connect to a CRI socket can run containers: on a real node
// that is root. The mock runs nothing, but it teaches the same habits as
// containerd's own socket handling:
//
//   - the socket is 0600 from its first moment (a umask around bind, not a
//     chmod after it, which leaves a window in which anyone may connect);
//   - the socket's folder is writable by us alone (checkSocketFolder):
//     in /tmp anyone could squat the path first;
//   - one starter per path: a flock on the sibling PATH.lock, held while
//     serving, so a second starter fails at once and names the first;
//   - an existing socket file is removed only when connecting to it is
//     refused (ECONNREFUSED: nobody listens, a crashed server left it) —
//     never a file that is not a socket, never one whose connect fails
//     otherwise (a busy live server says EAGAIN, another user's says
//     EACCES): that may be someone's live runtime.

// prepareSocketPath makes the path absolute, checks its length, creates its
// folder, takes the path's lock and clears a stale socket. The lock is
// held until release; on error nothing is held.
func prepareSocketPath(p string) (string, *socketLock, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", nil, err
	}
	if len(abs) > maxUnixPath {
		return "", nil, fmt.Errorf("unix socket path %s is %d bytes, over the %d-byte limit: use a shorter path", abs, len(abs), maxUnixPath)
	}
	dir := filepath.Dir(abs)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, fmt.Errorf("cannot create socket folder %s: %w", dir, err)
	}
	if err := syscall.Access(dir, 2 /* W_OK */); err != nil {
		return "", nil, fmt.Errorf("socket folder %s is not writable: %w", dir, err)
	}
	if err := checkSocketFolder(dir); err != nil {
		return "", nil, err
	}
	lock, err := lockSocketPath(abs)
	if err != nil {
		return "", nil, err
	}
	if err := clearStaleSocket(abs); err != nil {
		lock.release()
		return "", nil, err
	}
	return abs, lock, nil
}

// checkSocketFolder refuses a folder someone else may write to. There
// they could create a socket at our path before we start (crictl and the
// kubelet would talk to theirs), or swap ours while we serve, or put a
// symlink at the lock file's path. /tmp is the classic case: writable by
// all. A sticky folder (mode +t: only an entry's owner may remove or
// rename it) that we own is accepted, as is a folder that only its owner
// may write when that owner is us or root; anything else is refused.
// Kept simple: only the socket's own folder is checked, not its parents.
func checkSocketFolder(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	me := uint32(os.Geteuid())
	switch {
	case fi.Mode().Perm()&0o022 == 0 && (st.Uid == me || st.Uid == 0):
		return nil
	case fi.Mode().Perm()&0o022 == 0:
		return fmt.Errorf("socket folder %s belongs to uid %d, who could replace the socket: use a folder of yours", dir, st.Uid)
	case fi.Mode()&os.ModeSticky != 0 && st.Uid == me:
		return nil
	}
	return fmt.Errorf("socket folder %s is writable by others (%s, owner uid %d): another user could create the socket there before you, or replace it; use a folder only you can write", dir, fi.Mode(), st.Uid)
}

// clearStaleSocket removes abs if it is a socket nobody listens on. The
// caller holds the path's lock, so no other starter is between our check
// and our remove.
func clearStaleSocket(abs string) error {
	fi, err := os.Lstat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.Mode()&os.ModeSocket == 0:
		return fmt.Errorf("%s exists and is not a socket; refusing to replace it", abs)
	}
	conn, err := net.DialTimeout("unix", abs, time.Second)
	switch {
	case err == nil:
		conn.Close()
		return fmt.Errorf("socket %s is in use by a live server (stop it first, or pick another path)", abs)
	case !errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("socket %s exists and connecting to it failed with %q, not \"connection refused\": it may be a live server's, so not removing it (remove it yourself if nothing serves it)", abs, errText(err))
	}
	// Refused: nobody listens, a leftover from a killed server.
	if err := os.Remove(abs); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing stale socket %s: %w", abs, err)
	}
	return nil
}

// errText is the innermost cause of a dial error ("resource temporarily
// unavailable"), without net's "dial unix PATH:" prefix.
func errText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return err.Error()
}

// umaskMu serialises our umask changes. The umask is the process's, not
// the goroutine's: a file another goroutine creates during the few
// microseconds of a bind gets 0600-ish modes too — never looser ones.
var umaskMu sync.Mutex

func listenUnix(p string) (net.Listener, error) {
	umaskMu.Lock()
	old := syscall.Umask(0o177) // bind makes the socket 0777 &^ umask = 0600
	ln, err := net.Listen("unix", p)
	syscall.Umask(old)
	umaskMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", p, err)
	}
	return ln, nil
}

// socketLock is an exclusive flock on PATH.lock, which holds the pid of
// whoever has it.
type socketLock struct {
	path string
	f    *os.File
}

// lockSocketPath takes PATH.lock without waiting. The file is opened
// O_NOFOLLOW (a symlink planted there must not make us write elsewhere)
// and, once locked, must still be the file at that path: release removes
// it, and a starter that opened the old file just before must not think
// it holds the path.
func lockSocketPath(sock string) (*socketLock, error) {
	p := sock + ".lock"
	for range 5 {
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return nil, fmt.Errorf("lock file %s: %w", p, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			holder := "another process"
			if b, rerr := os.ReadFile(p); rerr == nil {
				if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
					holder = "pid " + strconv.Itoa(pid)
				}
			}
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("mock CRI socket %s is in use by %s (it holds %s): stop that one first, or pick another path", sock, holder, p)
			}
			return nil, fmt.Errorf("lock %s: %w", p, err)
		}
		var held, now syscall.Stat_t
		if syscall.Fstat(int(f.Fd()), &held) == nil && syscall.Lstat(p, &now) == nil && held.Ino == now.Ino && held.Dev == now.Dev {
			if err := f.Truncate(0); err == nil {
				_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
			}
			return &socketLock{path: p, f: f}, nil
		}
		f.Close() // released and removed while we waited: take the new one
	}
	return nil, fmt.Errorf("lock file %s keeps being replaced: is another starter looping on it?", p)
}

// release removes the lock file while still holding the lock, then drops
// it: whoever opened the old file finds it gone and tries again.
func (l *socketLock) release() {
	if l == nil || l.f == nil {
		return
	}
	os.Remove(l.path)
	l.f.Close()
	l.f = nil
}
