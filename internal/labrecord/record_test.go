package labrecord

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Create replaces the last run's record, Append keeps it; lines from many
// goroutines arrive whole; the file is the learner's alone.
func TestCreateReplacesAppendKeeps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calls.log")
	for _, open := range []func(string) (*Record, error){Create, Create, Append} {
		r, err := open(path)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { r.Line("RunPodSandbox %s", "ok") })
		}
		wg.Wait()
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		r.Close()
	}
	b, _ := os.ReadFile(path)
	if want := "RunPodSandbox ok\n"; string(b) != want+want+want+want {
		t.Errorf("after Create, Create, Append of two lines each:\n%q", b)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %o, want 0600", fi.Mode().Perm())
	}
	if _, err := Create(filepath.Join(path, "under-a-file")); err == nil {
		t.Error("Create under a file: no error")
	}
}
