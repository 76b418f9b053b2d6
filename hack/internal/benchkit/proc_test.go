package benchkit

import (
	"os"
	"testing"
)

// TestMemoryParts: the parts of a live process's resident memory are read
// from /proc: this test's own, whose binary is mapped (RssFile) and whose
// heap is in use (RssAnon), each at most its VmRSS.
func TestMemoryParts(t *testing.T) {
	m, err := readMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.anon <= 0 || m.file <= 0 || m.rss <= 0 || m.peak < m.rss {
		t.Fatalf("read %+v: want RssAnon, RssFile and VmRSS above zero and VmHWM at least VmRSS", m)
	}
	if m.anon > m.rss || m.file > m.rss {
		t.Errorf("read %+v: a part above the whole", m)
	}
	if _, err := readMemory(-1); err == nil {
		t.Error("no error for a process that cannot exist")
	}
}
