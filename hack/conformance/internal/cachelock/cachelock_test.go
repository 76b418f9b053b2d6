package cachelock

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestSecondHolderWaitsForTheFirst: while one holds the lock, another
// Hold on the same path does not return; it returns once the first lets
// go. The second holder is another process (flock(1), as a second test
// binary would be), and also another Hold in this one.
func TestSecondHolderWaitsForTheFirst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "busybox-1.37.0")
	unlock, err := Hold(path)
	if err != nil {
		t.Fatal(err)
	}

	other := exec.Command("flock", "--nonblock", path+".lock", "true")
	if err := other.Run(); err == nil {
		t.Fatal("another process took the lock while this one held it")
	}

	got := make(chan func())
	go func() {
		u, err := Hold(path)
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- u
	}()
	select {
	case <-got:
		t.Fatal("a second Hold returned while the first held the lock")
	case <-time.After(200 * time.Millisecond):
	}
	unlock()
	second, ok := <-got
	if !ok {
		return
	}
	second()

	if err := exec.Command("flock", "--nonblock", path+".lock", "true").Run(); err != nil {
		t.Fatalf("the lock is still held after both let go: %v", err)
	}
}
