package labenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// TestKlogToFileWritesEachLineOnce: an error line lands in the file once,
// not once per severity it covers (error, warning, info), and after
// restore nothing more goes to the file.
func TestKlogToFileWritesEachLineOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "klog.log")
	restore, err := KlogToFile(path)
	if err != nil {
		t.Fatal(err)
	}
	klog.ErrorS(nil, "an error line")
	klog.InfoS("an info line")
	restore()
	klog.InfoS("after restore")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for line, want := range map[string]int{"an error line": 1, "an info line": 1, "after restore": 0} {
		if n := strings.Count(got, line); n != want {
			t.Errorf("%q is in the file %d times, want %d:\n%s", line, n, want, got)
		}
	}
}
