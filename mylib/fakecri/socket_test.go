package fakecri

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// TestSocketIsNeverOpenToOthers: the socket is 0600 from the moment it
// exists, whatever the process's umask. Listening and then chmod-ing
// leaves a moment in which another user may connect; an observer polls
// the path while the socket is made and closed again, under umask 0.
func TestSocketIsNeverOpenToOthers(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	sock := filepath.Join(shortTempDir(t), "cri.sock")
	var stop atomic.Bool
	var seen atomic.Uint32
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			if fi, err := os.Lstat(sock); err == nil && fi.Mode().Perm()&0o077 != 0 {
				seen.Store(uint32(fi.Mode().Perm()))
			}
		}
	})
	for i := 0; i < 5000 && seen.Load() == 0; i++ {
		ln, err := listenUnix(sock)
		if err != nil {
			stop.Store(true)
			wg.Wait()
			t.Fatal(err)
		}
		ln.Close() // unlinks the socket
	}
	stop.Store(true)
	wg.Wait()
	if m := seen.Load(); m != 0 {
		t.Fatalf("the socket was mode %#o for a moment: anyone could connect", m)
	}
}

// TestSecondStarterIsLockedOut: two starters on one path must not both
// serve, even when the first one's socket file is gone (removed by hand,
// or by a third starter that thought it stale): the second would make a
// new socket and the first would serve nobody. A flock on "PATH.lock"
// keeps the path to one starter, and names it.
func TestSecondStarterIsLockedOut(t *testing.T) {
	sock := filepath.Join(shortTempDir(t), "cri.sock")
	first, err := Start(sock)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(sock)
	second, err := Start(sock)
	if err == nil {
		second.Stop()
		first.Stop()
		t.Fatal("a second Start on the same path served while the first still ran")
	}
	want := fmt.Sprintf("%s is in use by pid %d (it holds %s.lock)", sock, os.Getpid(), sock)
	if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("second Start: %v; want one line with %q", err, want)
	}
	first.Stop()
	if _, err := os.Stat(sock + ".lock"); !os.IsNotExist(err) {
		t.Errorf("the lock file outlived Stop: %v", err)
	}
	third, err := Start(sock)
	if err != nil {
		t.Fatalf("Start after Stop: %v", err)
	}
	third.Stop()
}

// TestStartRemovesOnlyARefusedSocket: a socket file is stale only when
// connecting to it is refused (ECONNREFUSED: nobody listens). A live
// server that cannot take one more connection right now (its backlog is
// full: EAGAIN) is someone's, and its socket stays.
func TestStartRemovesOnlyARefusedSocket(t *testing.T) {
	sock := filepath.Join(shortTempDir(t), "cri.sock")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	// Fill the backlog: one connection waits, the next would block.
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range 4 {
		c, err := net.Dial("unix", sock)
		if err != nil {
			break
		}
		held = append(held, c)
	}
	srv, err := Start(sock)
	if err == nil {
		srv.Stop()
		t.Fatal("Start took the socket of a live (busy) server")
	}
	if !strings.Contains(err.Error(), "not removing it") {
		t.Errorf("Start on a busy live socket: %v", err)
	}
	if fi, err := os.Lstat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("the live server's socket is gone: %v", err)
	}
}

// TestLockFileIsNotFollowed: a symlink planted at PATH.lock is not
// followed (the lock file is written: it holds our pid).
func TestLockFileIsNotFollowed(t *testing.T) {
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "cri.sock")
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("precious"), 0o600)
	os.Symlink(victim, sock+".lock")
	srv, err := Start(sock)
	if err == nil {
		srv.Stop()
		t.Fatal("Start followed a symlink at the lock file's path")
	}
	if !strings.Contains(err.Error(), "lock") {
		t.Errorf("Start: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Errorf("the symlink's target was written: %q", b)
	}
}

// TestStaleLockFileIsTaken: a lock file left by a killed starter (its
// flock died with it) does not stop the next one.
func TestStaleLockFileIsTaken(t *testing.T) {
	sock := filepath.Join(shortTempDir(t), "cri.sock")
	os.WriteFile(sock+".lock", []byte("999999\n"), 0o600)
	srv, err := Start(sock)
	if err != nil {
		t.Fatalf("a stale lock file stopped Start: %v", err)
	}
	if b, _ := os.ReadFile(sock + ".lock"); string(b) != fmt.Sprintf("%d\n", os.Getpid()) {
		t.Errorf("lock file holds %q, want our pid", b)
	}
	srv.Stop()
}

// TestStartRefusesAFolderOthersMayWrite: in a folder others may write
// (/tmp is the classic) another user could create the socket first, or
// swap ours. Refused unless the folder is sticky and ours; a folder only
// we may write is fine.
func TestStartRefusesAFolderOthersMayWrite(t *testing.T) {
	mk := func(mode os.FileMode, uid int) string {
		d := filepath.Join(shortTempDir(t), "s")
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		if uid >= 0 {
			if err := os.Chown(d, uid, -1); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	refused := map[string]string{
		"world-writable": mk(0o777, -1),
		"group-writable": mk(0o770, -1),
		"other-writable": mk(0o757, -1),
	}
	var allowed = map[string]string{
		"ours, 0700":        mk(0o700, -1),
		"ours, sticky 1777": mk(0o777|os.ModeSticky, -1),
	}
	if os.Geteuid() == 0 {
		// Root may hand a folder to someone else: sticky but theirs.
		refused["sticky, someone else's"] = mk(0o777|os.ModeSticky, 65534)
	} else {
		// Not root: /tmp is root's and sticky, so it is someone else's.
		refused["/tmp as a user"] = "/tmp"
	}
	sockIn := func(d string) string {
		if d == "/tmp" {
			return fmt.Sprintf("/tmp/fakecri-test-%d.sock", os.Getpid())
		}
		return filepath.Join(d, "cri.sock")
	}
	for name, d := range refused {
		sock := sockIn(d)
		srv, err := Start(sock)
		if err == nil {
			srv.Stop()
			t.Errorf("%s (%s): served", name, d)
			continue
		}
		if !strings.Contains(err.Error(), "socket folder "+d+" is writable by others") {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := os.Lstat(sock); !os.IsNotExist(err) {
			t.Errorf("%s: left %s behind", name, sock)
		}
	}
	for name, d := range allowed {
		srv, err := Start(filepath.Join(d, "cri.sock"))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		srv.Stop()
	}
}
