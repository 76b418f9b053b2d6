package testenv

import (
	"context"
	"testing"
	"time"

	"kubelet-labs/internal/controlplane"
)

// OwnControlPlane starts a control plane for the calling test alone, with
// the node monitor grace period given (the shared one keeps lab 00's 30 s):
// for tests that watch the node lifecycle controller on their own clock. It
// stops when the test ends, and names its logs if the test failed.
func OwnControlPlane(t *testing.T, grace time.Duration) *controlplane.ControlPlane {
	t.Helper()
	root, binDir := Binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Config{
		Dir: t.TempDir(), BinDir: binDir, ModuleRoot: root, UnsafeNoFsync: true,
		NodeMonitorGracePeriod: grace,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane logs: %v", cp.LogFiles())
		}
		cp.Stop()
	})
	return cp
}
