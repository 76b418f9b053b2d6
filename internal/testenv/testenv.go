// Package testenv gives tests a real control plane: etcd, kube-apiserver and
// kube-controller-manager from internal/controlplane, started once per test
// binary on free loopback ports and torn down when the binary ends.
//
// Use it from a package's TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		cp := testenv.ControlPlane(t)
//		client := testenv.AdminClient(t)
//		...
//	}
//
// It never skips: missing binaries are built (under a file lock shared by
// all packages testing in parallel), and when that is impossible the test
// fails with the exact command to run. On failure the component logs are
// kept and their paths printed.
package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubelet-labs/internal/controlplane"
	"kubelet-labs/internal/state"
)

var (
	once         sync.Once
	shared       *controlplane.ControlPlane
	dir          string
	sharedBinDir string // the shared control plane's binaries (and kubectl)
	startErr     error

	mu     sync.Mutex
	failed bool // some test using the control plane failed: keep the logs
)

// Main runs the package's tests, then stops the shared control plane (if a
// test started one) and exits with the tests' code.
func Main(m *testing.M) {
	code := m.Run()
	removeBuiltLabs()
	if err := shutdown(code != 0); err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// buildBudget is how much test time a cold build of the binaries needs;
// with less left we fail at once with the command to run instead of
// dying in go test's timeout panic half way through a compile.
const buildBudget = 15 * time.Minute

// ControlPlane returns the shared control plane, starting it on first use.
func ControlPlane(tb testing.TB) *controlplane.ControlPlane {
	tb.Helper()
	once.Do(func() { shared, dir, startErr = start(tb) })
	if startErr != nil {
		tb.Fatalf("testenv: control plane did not start: %v", startErr)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			mu.Lock()
			failed = true
			mu.Unlock()
			tb.Logf("control plane logs (kept after the run): %v", shared.LogFiles())
			// CI throws the machine away: what the logs say about the
			// failure must be in the test's own output.
			for _, f := range shared.LogFiles() {
				tb.Logf("the last lines of %s:\n%s", filepath.Base(f), logTail(f, tailLines))
			}
		}
	})
	return shared
}

// AdminConfig returns a rest.Config for the shared control plane's admin.
func AdminConfig(tb testing.TB) *rest.Config {
	tb.Helper()
	cfg, err := ControlPlane(tb).AdminConfig()
	if err != nil {
		tb.Fatalf("admin kubeconfig: %v", err)
	}
	return cfg
}

// AdminClient returns a clientset for the shared control plane's admin.
func AdminClient(tb testing.TB) kubernetes.Interface {
	tb.Helper()
	c, err := kubernetes.NewForConfig(AdminConfig(tb))
	if err != nil {
		tb.Fatalf("admin client: %v", err)
	}
	return c
}

// Binaries makes sure the control plane binaries are built and returns the
// module root and the bin folder, for tests that start their own control
// plane or run the binaries directly.
func Binaries(tb testing.TB) (moduleRoot, binDir string) {
	tb.Helper()
	root, binDir, err := binaries(tb)
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	return root, binDir
}

func binaries(tb testing.TB) (root, binDir string, err error) {
	if root, err = state.Root(); err != nil {
		return "", "", err
	}
	if binDir, err = state.Ensure("bin"); err != nil {
		return "", "", err
	}
	if missing := controlplane.MissingBinaries(binDir); len(missing) > 0 {
		if dl, ok := deadline(tb); ok && time.Until(dl) < buildBudget {
			return "", "", fmt.Errorf("the control plane binaries are not built (%s missing) and a cold build needs ~%s, more than this test's timeout leaves; build them first with `%s`, or run go test with -timeout 45m",
				missing[0].Name, buildBudget, controlplane.BuildCommand())
		}
		tb.Logf("testenv: building control plane binaries into %s (once; other packages wait on the lock)", binDir)
		if err := controlplane.EnsureBinaries(root, binDir, testWriter{tb}); err != nil {
			return "", "", err
		}
	}
	return root, binDir, nil
}

func start(tb testing.TB) (*controlplane.ControlPlane, string, error) {
	root, binDir, err := binaries(tb)
	if err != nil {
		return nil, "", err
	}
	testsDir, err := state.Ensure("test")
	if err != nil {
		return nil, "", err
	}
	sweepStale(testsDir)

	// Free ports are picked, then bound by the children a moment later;
	// another package can win that race, so retry a few times.
	var lastErr error
	for attempt := 1; attempt <= 3; attempt++ {
		d, err := os.MkdirTemp(testsDir, "cp-")
		if err != nil {
			return nil, "", err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cp, err := controlplane.Start(ctx, controlplane.Config{
			Dir: d, BinDir: binDir, ModuleRoot: root,
			UnsafeNoFsync: true, // test data is thrown away; fsync only slows etcd down
		})
		cancel()
		if err == nil {
			sharedBinDir = binDir
			return cp, d, nil
		}
		lastErr = fmt.Errorf("%w (state kept in %s)", err, d)
		tb.Logf("testenv: start attempt %d failed: %v", attempt, err)
	}
	return nil, "", lastErr
}

func deadline(tb testing.TB) (time.Time, bool) {
	if d, ok := tb.(interface{ Deadline() (time.Time, bool) }); ok {
		return d.Deadline()
	}
	return time.Time{}, false
}

func shutdown(keepLogs bool) error {
	if shared == nil {
		return nil
	}
	err := shared.Stop()
	mu.Lock()
	keep := keepLogs || failed
	mu.Unlock()
	if keep || err != nil {
		_ = os.WriteFile(filepath.Join(dir, keptMarker), nil, 0o600)
		fmt.Fprintf(os.Stderr, "testenv: control plane state and logs kept in %s (removed by a test run after 24h)\n", dir)
		return err
	}
	return os.RemoveAll(dir)
}

// keptMarker marks the folder of a failed run, kept for reading its logs.
const keptMarker = "KEPT-AFTER-FAILURE"

// sweepStale removes the folders of test control planes whose owner died
// (the run lock is free) and that are old enough not to be starting now;
// folders kept after a failure stay a day.
func sweepStale(testsDir string) {
	entries, _ := os.ReadDir(testsDir)
	for _, e := range entries {
		p := filepath.Join(testsDir, e.Name())
		info, err := e.Info()
		if err != nil || !e.IsDir() || time.Since(info.ModTime()) < 10*time.Minute {
			continue
		}
		if _, err := os.Stat(filepath.Join(p, keptMarker)); err == nil && time.Since(info.ModTime()) < 24*time.Hour {
			continue
		}
		if !controlplane.InUse(p) {
			os.RemoveAll(p)
		}
	}
}

// tailLines is how much of each component's log a failed test prints.
const tailLines = 25

// logTail returns the last n lines of a log, or why it cannot.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Log(string(p))
	return len(p), nil
}
