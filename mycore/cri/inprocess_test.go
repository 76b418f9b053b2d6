package cri_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"kubelet-labs/internal/critest"
	"kubelet-labs/mycore/cri"
	"kubelet-labs/mylib/fakecri"
)

// TestInProcess runs every behaviour a mock can show against the mock
// called in process: the adapter must keep what the remote client gives
// callers (exit codes, NotFound, required fields).
func TestInProcess(t *testing.T) {
	const pause, busybox = "registry.k8s.io/pause:3.10.2", "docker.io/library/busybox:1.36"
	mock := fakecri.New(fakecri.WithPauseImage(pause), fakecri.WithImages(busybox))
	t.Cleanup(mock.Close)
	c := cri.InProcess("test", mock, mock)
	rt := critest.Runtime{Name: "fakecri-in-process", Endpoint: c.Endpoint, PauseImage: pause, BusyboxImage: busybox}
	for _, b := range behaviours {
		t.Run(b.name, func(t *testing.T) {
			if b.realOnly {
				t.Skipf("%s is a mock: %s needs a real runtime", rt.Name, b.name)
			}
			b.run(t, rt, c)
		})
	}
	t.Run("NoEventStream", func(t *testing.T) {
		err := c.Runtime.GetContainerEvents(context.Background(), nil, nil)
		if err == nil {
			t.Fatal("GetContainerEvents: want an error in process (no stream), got nil")
		}
		if status.Code(err) != codes.Unimplemented {
			t.Fatalf("GetContainerEvents: want Unimplemented, got %v", err)
		}
	})
}
