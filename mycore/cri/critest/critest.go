// Package critest gives tests a CRI runtime to run against: the course's
// real containerd (started by scripts/containerd-up.sh) and, where the
// behaviour is the same, the mock runtime of mylib/fakecri. One table of
// tests, several runtimes: that keeps the mock honest.
//
// The one rule every real-runtime lab shares lives here (Require): in CI
// (CI=true) a missing containerd fails the test; elsewhere the test is
// skipped with the command that starts it.
package critest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/mycore/cri"
)

// Runtime is a CRI endpoint plus what a test needs to know about it.
type Runtime struct {
	Name         string
	Endpoint     string // unix:///…
	PauseImage   string // the sandbox image, informational
	BusyboxImage string // the image test containers run (has sh, echo, sleep)
	// Real: processes, files and namespaces really exist (log files are
	// written, signals are delivered). Tests of kernel-level behaviour run
	// only where Real is true.
	Real bool
}

// Case is a runtime a table test can run against. Setup starts or finds it,
// skips (or fails in CI) if it is unavailable, and registers any cleanup.
type Case struct {
	Name  string
	Setup func(testing.TB) Runtime
}

// Cases are the runtimes every behaviour test runs against.
func Cases() []Case {
	return []Case{
		{Name: "containerd", Setup: Containerd},
		{Name: "fakecri", Setup: FakeCRI},
	}
}

// InCI reports whether the tests run in CI, where every runtime must exist.
func InCI() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v != "" && v != "false" && v != "0"
}

// Require is what a test does when something it needs is missing: skip
// with the reason and a fix, or, in CI, fail. CI installs everything, so a
// missing runtime there is a broken pipeline, not an optional test.
func Require(t testing.TB, ok bool, format string, args ...any) {
	t.Helper()
	if ok {
		return
	}
	if InCI() {
		t.Fatalf("CI=true, so this fails instead of skipping: "+format, args...)
	}
	t.Skipf("skipping: "+format, args...)
}

// Containerd finds the course's containerd via .labs/containerd/env (or
// CONTAINER_RUNTIME_ENDPOINT) and checks that it answers CRI v1.
func Containerd(t testing.TB) Runtime {
	t.Helper()
	env, err := cri.Load()
	if err != nil {
		t.Fatalf("finding containerd: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := cri.Dial(ctx, env.Endpoint, cri.WithTimeout(10*time.Second))
	if err != nil {
		hint := ""
		switch {
		case errors.Is(err, cri.ErrPermission):
			hint = "\n(the socket is root's: run the tests as root)"
		case !errors.Is(err, cri.ErrNotReachable):
			hint = "\n(restart it with: " + cri.UpHint + ")"
		}
		Require(t, false, "containerd is not available: %v%s", err, hint)
	}
	defer c.Close()
	Require(t, env.BusyboxImage != "", "no busybox image recorded in %s: run %s", env.File, cri.UpHint)
	has, err := c.HasImage(ctx, env.BusyboxImage)
	if err != nil {
		t.Fatalf("ImageStatus %s: %v", env.BusyboxImage, err)
	}
	Require(t, has, "containerd has no image %s: run %s (it imports it)", env.BusyboxImage, cri.UpHint)
	return Runtime{Name: "containerd", Endpoint: env.Endpoint, PauseImage: env.PauseImage, BusyboxImage: env.BusyboxImage, Real: true}
}

// Dial connects to rt with generous timeouts and closes the client when the
// test ends.
func Dial(t testing.TB, rt Runtime) *cri.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := cri.Dial(ctx, rt.Endpoint, cri.WithTimeout(30*time.Second))
	if err != nil {
		t.Fatalf("dial %s: %v", rt.Name, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Pod returns a uniquely named pod for this test, labelled so a test can
// list only its own pods, with its logs in a temporary folder.
func Pod(t testing.TB, name string) cri.Pod {
	t.Helper()
	suffix := randHex(4)
	return cri.Pod{
		Name:      name + "-" + suffix,
		Namespace: "critest",
		UID:       "critest-" + randHex(8),
		LogDir:    t.TempDir(),
		Labels:    map[string]string{"kubelet-labs/test": suffix},
	}
}

// RunPod starts p's sandbox and removes the pod (containers included) when
// the test ends, even if it fails. It returns the sandbox ID and config.
func RunPod(t testing.TB, c *cri.Client, p cri.Pod) (string, *runtimeapi.PodSandboxConfig) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id, cfg, err := c.RunPod(ctx, p)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		// grace 0: SIGKILL at once, cleanup need not wait for a PID 1 that ignores SIGTERM
		if err := c.RemovePod(ctx, id, 0); err != nil {
			t.Errorf("cleanup: remove pod %s: %v", p.Name, err)
		}
	})
	return id, cfg
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
