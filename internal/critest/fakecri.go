package critest

import (
	"os"
	"path/filepath"
	"testing"

	"kubelet-labs/internal/containerdenv"
	"kubelet-labs/mylib/fakecri"
)

// The mock uses the same image names as our containerd, so a test (and a
// lab) needs no per-runtime image table.
const (
	mockPauseImage   = containerdenv.PauseImage
	mockBusyboxImage = containerdenv.BusyboxImage
)

// FakeCRI starts the mock runtime of mylib/fakecri on a socket of its own
// and stops it when the test ends. It is always available: no skip.
func FakeCRI(t testing.TB) Runtime {
	t.Helper()
	// a short folder: t.TempDir() paths can exceed a socket path's 108 bytes
	dir, err := os.MkdirTemp("", "critest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	srv, err := fakecri.Start(filepath.Join(dir, "cri.sock"),
		fakecri.WithPauseImage(mockPauseImage), fakecri.WithImages(mockBusyboxImage))
	if err != nil {
		t.Fatalf("start fakecri: %v", err)
	}
	t.Cleanup(srv.Stop)
	return Runtime{Name: "fakecri", Endpoint: srv.Endpoint(), PauseImage: mockPauseImage, BusyboxImage: mockBusyboxImage}
}
