// Package critest gives tests a CRI runtime to run against: the course's
// real containerd (started by scripts/containerd-up.sh; 2.2, 1.6 or both
// side by side) and, where the behaviour is the same, the mock runtime of
// mylib/fakecri. One table of tests, several runtimes: that keeps the mock
// honest, and runs every real-runtime test on each containerd flavour.
//
// The one rule every real-runtime lab shares lives here (Require): in CI
// (CI=true) a missing containerd fails the test; elsewhere the test is
// skipped with the command that starts it.
//
// It is test harness a test of mycore may use (internal/coursecheck checks
// that): it finds containerd through internal/containerdenv, never through
// a lab's plumbing (internal/labruntime), so a library's test links no
// lab's flags or state.
package critest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/internal/containerdenv"
	"kubelet-labs/mycore/cri"
)

// Runtime is a CRI endpoint plus what a test needs to know about it.
type Runtime struct {
	Name         string // "containerd-2.2", "containerd-1.6", "containerd" (the default), "fakecri"
	Version      string // the runtime's version from the up script, e.g. v2.2.9 ("" if unknown)
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

// FlavoursEnvVar names the containerd flavours a test run must cover, as a
// list ("2.2", "1.6", "2.2,1.6" or "all"); scripts/containerd-up.sh starts
// the same list. CI sets it, so a flavour that is not running fails there.
const FlavoursEnvVar = "LABS_CONTAINERD"

// Cases are the runtimes every behaviour test runs against: one case per
// containerd flavour (containerd-2.2, containerd-1.6; see Flavours), then
// the mock. With no flavour to name, one "containerd" case uses the labs'
// default runtime (Containerd).
func Cases() []Case {
	var cases []Case
	for _, f := range Flavours() {
		cases = append(cases, Case{Name: "containerd-" + f, Setup: func(t testing.TB) Runtime { return ContainerdFlavour(t, f) }})
	}
	if len(cases) == 0 {
		cases = append(cases, Case{Name: "containerd", Setup: Containerd})
	}
	return append(cases, Case{Name: "fakecri", Setup: FakeCRI})
}

// Flavours are the containerd flavours to test: those in LABS_CONTAINERD if
// set, else those containerd-up.sh started (their env files exist). None
// when CONTAINER_RUNTIME_ENDPOINT points the tests at one runtime of the
// learner's choice, or when nothing was started.
func Flavours() []string {
	if os.Getenv(containerdenv.EndpointEnvVar) != "" {
		return nil
	}
	if v := strings.TrimSpace(os.Getenv(FlavoursEnvVar)); v != "" {
		if v == "all" {
			return containerdenv.Flavours()
		}
		var list []string
		for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
			if !slices.Contains(list, f) {
				list = append(list, f) // an unknown name fails in its case's Setup
			}
		}
		return list
	}
	started, err := containerdenv.StartedFlavours()
	if err != nil {
		return nil // Containerd reports the state folder's problem
	}
	return started
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

// Containerd finds the labs' default containerd via root's tree's
// containerd/env (or CONTAINER_RUNTIME_ENDPOINT) and checks that it answers
// CRI v1 and has the busybox image.
func Containerd(t testing.TB) Runtime {
	t.Helper()
	env, err := containerdenv.Load()
	if err != nil {
		t.Fatalf("finding containerd: %v", err)
	}
	return check(t, "containerd", env, containerdenv.UpHint)
}

// ContainerdFlavour finds one flavour's containerd ("2.2" or "1.6") via its
// own env file and checks it as Containerd does.
func ContainerdFlavour(t testing.TB, flavour string) Runtime {
	t.Helper()
	env, err := containerdenv.LoadFlavour(flavour)
	if err != nil {
		t.Fatalf("finding containerd %s: %v", flavour, err)
	}
	return check(t, "containerd-"+flavour, env, containerdenv.UpHint+" --version "+flavour)
}

// check dials env's endpoint; what is missing skips (or fails in CI) with
// upHint, the command that fixes it.
func check(t testing.TB, name string, env containerdenv.Env, upHint string) Runtime {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	// the start hint: the dial error names the plain up command, as a lab's does
	c, err := cri.Dial(ctx, env.Endpoint, cri.WithTimeout(10*time.Second), cri.WithStartHint(containerdenv.UpHint))
	if err != nil {
		hint := ""
		switch {
		case errors.Is(err, cri.ErrPermission):
			hint = "\n(the socket belongs to another user: run the tests as the user who ran sudo scripts/containerd-up.sh)"
		case !errors.Is(err, cri.ErrNotReachable):
			hint = "\n(restart it with: " + upHint + ")"
		case upHint != containerdenv.UpHint:
			// the dial error names the plain up command, which starts the default flavour
			hint = "\n(this flavour: " + upHint + ")"
		}
		Require(t, false, "%s is not available: %v%s", name, err, hint)
	}
	defer c.Close()
	Require(t, env.BusyboxImage != "", "no busybox image recorded for %s in %q: run %s", name, env.File, upHint)
	has, err := c.HasImage(ctx, env.BusyboxImage)
	if err != nil {
		t.Fatalf("ImageStatus %s: %v", env.BusyboxImage, err)
	}
	Require(t, has, "%s has no image %s: run %s (it imports it)", name, env.BusyboxImage, upHint)
	return Runtime{Name: name, Version: env.Version, Endpoint: env.Endpoint, PauseImage: env.PauseImage, BusyboxImage: env.BusyboxImage, Real: true}
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
