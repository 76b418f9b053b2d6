package fakecri

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReadUnderRefusesASymlinkSwappedIn: a container (or whoever writes
// its volume) can plant a symlink in a mount's host folder at any moment.
// Resolving the path and then opening it leaves a window in which a
// folder checked as inside is swapped for a symlink to outside; the open
// must be done relative to the mount's root in one go (os.Root) so that no
// moment exists in which it escapes. The swap is atomic (renameat2
// RENAME_EXCHANGE) and runs the whole time.
func TestReadUnderRefusesASymlinkSwappedIn(t *testing.T) {
	host, outside := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(host, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(host, "d", "f"), []byte("inside"), 0o644)
	os.WriteFile(filepath.Join(outside, "f"), []byte("outside"), 0o644)
	if err := os.Symlink(outside, filepath.Join(host, "l")); err != nil {
		t.Fatal(err)
	}

	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(host, "d"), unix.AT_FDCWD, filepath.Join(host, "l"), unix.RENAME_EXCHANGE); err != nil {
				t.Error(err)
				return
			}
		}
	})
	defer func() { stop.Store(true); wg.Wait() }()

	inside, reads := 0, 0
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); reads++ {
		b, err := readUnder(host, "/d/f")
		switch {
		case string(b) == "outside":
			t.Fatalf("read %d: /d/f followed a symlink swapped in for d, to %s", reads, outside)
		case err == nil:
			inside++
		}
	}
	if inside == 0 {
		t.Errorf("none of %d reads of /d/f found the file inside", reads)
	}
	t.Logf("%d reads, %d inside, none outside", reads, inside)
}

// TestReadUnderPlantedSymlinks: a symlink out of the mount is refused; one
// that stays inside it (the kubelet's ..data layout) is followed; the
// mount itself may be a single file (/dev/termination-log); a FIFO does
// not hang the read.
func TestReadUnderPlantedSymlinks(t *testing.T) {
	host, outside := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("outside"), 0o644)
	os.Symlink(outside, filepath.Join(host, "out"))
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(host, "abs"))
	os.Symlink("../../"+filepath.Base(outside)+"/secret", filepath.Join(host, "rel"))
	os.Mkdir(filepath.Join(host, "..v1"), 0o755)
	os.WriteFile(filepath.Join(host, "..v1", "key"), []byte("value"), 0o644)
	os.Symlink("..v1", filepath.Join(host, "..data"))
	os.Symlink("..data/key", filepath.Join(host, "key"))
	for _, rel := range []string{"/out/secret", "/abs", "/rel", "/../" + filepath.Base(outside) + "/secret"} {
		if b, err := readUnder(host, rel); err == nil || string(b) == "outside" {
			t.Errorf("readUnder(%s): %q, %v; want refused", rel, b, err)
		}
	}
	if b, err := readUnder(host, "/key"); err != nil || string(b) != "value" {
		t.Errorf("readUnder(/key): %q, %v", b, err)
	}
	if _, err := readUnder(host, "/..v1"); err == nil || err.Error() != "Is a directory" {
		t.Errorf("readUnder(a folder): %v", err)
	}
	// A FIFO with no writer would block an open for reading forever.
	if err := unix.Mkfifo(filepath.Join(host, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readUnder(host, "/fifo"); err == nil || err.Error() != "Not a regular file" {
		t.Errorf("readUnder(a FIFO): %v", err)
	}
	file := filepath.Join(t.TempDir(), "termination-log")
	os.WriteFile(file, []byte("last words"), 0o644)
	if b, err := readUnder(file, ""); err != nil || string(b) != "last words" {
		t.Errorf("a mount of one file: %q, %v", b, err)
	}
}
