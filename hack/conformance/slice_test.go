package conformance

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"kubelet-labs/hack/conformance/internal/harness"
	"kubelet-labs/hack/conformance/internal/images"
)

// slice are specs of the selection our kubelet passes today that need only
// the busybox and pause images (cheap: no agnhost build), by their full
// names. BASELINE.md has the whole selection's result.
var slice = []string{
	"[sig-node] Pods should get a host IP [NodeConformance] [Conformance]",
	"[sig-node] Pods should be submitted and removed [NodeConformance] [Conformance]",
	"[sig-node] InitContainer [NodeConformance] should invoke init containers on a RestartNever pod [Conformance]",
	"[sig-node] Kubelet when scheduling a busybox command in a pod should print the output to logs [NodeConformance] [Conformance]",
	"[sig-node] Downward API should provide pod name, namespace and IP address as env vars [NodeConformance] [Conformance]",
	"[sig-node] Variable Expansion should allow composing env vars into new env vars [NodeConformance] [Conformance]",
	"[sig-node] ConfigMap should be consumable via the environment [NodeConformance] [Conformance]",
	"[sig-node] Ephemeral Containers [NodeConformance] will start an ephemeral container in an existing pod [Conformance]",
}

// TestConformanceSlice runs the slice against lab 18 on the course's
// containerd, as `make conformance FOCUS=...` would, and asserts that
// every spec of it passed.
func TestConformanceSlice(t *testing.T) {
	_, err := harness.FindRuntime()
	l := needContainerd(t, err)
	focus := make([]string, len(slice))
	for i, name := range slice {
		// ginkgo matches "<suite description> <spec text>"
		// (ginkgo/v2 internal/focus.go:124): the name, whole
		focus[i] = " " + regexp.QuoteMeta(name) + "$"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	runDir := filepath.Join(l.Dir, "runs", "slice-"+time.Now().Format("20060102-150405"))
	s, err := l.Run(ctx, harness.Options{
		Focus: focus, Skip: harness.DefaultSkip, Node: harness.NodeMyKubelet, NodeName: "conformance-slice", Procs: 4,
		Images: []string{images.BusyBox}, RunDir: runDir, Timeout: 20 * time.Minute,
		Progress: testWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	s.Print(&b)
	t.Logf("%s(report: %s)", b.String(), runDir)
	if s.Passed != len(slice) || s.Failed != 0 {
		t.Errorf("want all %d specs of the slice passed, got %d passed, %d failed, %d skipped; see %s", len(slice), s.Passed, s.Failed, s.Skipped, runDir)
	}
}

// needContainerd skips the test when the course's containerd is not up
// (findErr), or fails it under CI, which starts it; else it returns the
// harness's layout.
func needContainerd(t *testing.T, findErr error) *harness.Layout {
	t.Helper()
	if findErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("containerd: %v", findErr)
		}
		t.Skipf("needs the course's containerd: %v", findErr)
	}
	l, err := harness.NewLayout()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
