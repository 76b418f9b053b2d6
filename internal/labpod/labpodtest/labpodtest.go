// Package labpodtest is what the tests of labs built on internal/labpod
// share: their options for one runtime of the shared table, and the leak
// check.
package labpodtest

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"kubelet-labs/internal/critest"
	"kubelet-labs/internal/labpod"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
)

// Options runs a lab against the test's control plane on one runtime of
// critest's table: the mock in the lab's own process (case "fakecri"), or
// a containerd with its own endpoint and busybox image. The state folder
// becomes a short temporary one — the mock's socket path must stay under
// 108 bytes — after containerd was found in the real one.
func Options(t *testing.T, rc critest.Case, nodeName string) labpod.Options {
	t.Helper()
	o := labpod.Options{Kubeconfig: testenv.ControlPlane(t).AdminKubeconfig(),
		Flags: labruntime.Flags{Kind: labruntime.Mock, PodLogsDir: t.TempDir()}, NodeName: nodeName}
	if rc.Name != "fakecri" {
		rt := rc.Setup(t)
		o.Kind, o.Endpoint, o.Image = labruntime.Containerd, rt.Endpoint, rt.BusyboxImage
	}
	dir, err := os.MkdirTemp("", "labpod-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Setenv(state.EnvVar, dir)
	return o
}

// Mock is Options on the mock.
func Mock(t *testing.T, nodeName string) labpod.Options {
	return Options(t, critest.Case{Name: "fakecri"}, nodeName)
}

// NoLeaks fails the test if goroutines beyond ignore are left; the HTTP
// connections client-go keeps open to the apiserver do not count.
func NoLeaks(t *testing.T, ignore goleak.Option) {
	t.Helper()
	goleak.VerifyNone(t, ignore,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"))
}
