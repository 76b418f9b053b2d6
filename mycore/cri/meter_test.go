package cri_test

import (
	"context"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/mycore/cri"
	"kubelet-labs/mylib/fakecri"
)

// TestEveryCallThroughTheClientIsCounted: a call made through the Client's
// own helpers, one made on its Runtime or Images directly (as the PLEG, the
// streaming server and log rotation do), and one that fails are each
// counted under their CRI method.
func TestEveryCallThroughTheClientIsCounted(t *testing.T) {
	const pause = "registry.k8s.io/pause:3.10.2"
	mock := fakecri.New(fakecri.WithPauseImage(pause))
	t.Cleanup(mock.Close)
	c := cri.InProcess("meter", mock, mock)
	ctx := context.Background()

	if _, err := c.Pods(ctx, nil); err != nil { // the package's helper
		t.Fatal(err)
	}
	if _, err := c.Runtime.ListPodSandbox(ctx, nil); err != nil { // the service directly
		t.Fatal(err)
	}
	if _, err := c.Runtime.PodSandboxStatus(ctx, "no-such-sandbox", false); err == nil {
		t.Fatal("PodSandboxStatus of no sandbox: want NotFound, got nil")
	}
	if _, err := c.Images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: pause}, false); err != nil {
		t.Fatal(err)
	}

	want := map[string]cri.CallCount{
		"ListPodSandbox":   {Method: "ListPodSandbox", Calls: 2},
		"PodSandboxStatus": {Method: "PodSandboxStatus", Calls: 1, Failed: 1},
		"ImageStatus":      {Method: "ImageStatus", Calls: 1},
	}
	got := c.Meter().Counts()
	if len(got) != len(want) {
		t.Fatalf("counted %+v, want the %d methods called: %+v", got, len(want), want)
	}
	for _, g := range got {
		w, ok := want[g.Method]
		if !ok || g.Calls != w.Calls || g.Failed != w.Failed {
			t.Errorf("%s: %d calls, %d failed; want %+v", g.Method, g.Calls, g.Failed, w)
		}
		if g.Took <= 0 {
			t.Errorf("%s: took %v, want the calls' time", g.Method, g.Took)
		}
	}
	if n := c.Meter().Total(); n != 4 {
		t.Errorf("Total = %d, want 4", n)
	}
}

// TestAClientBuiltByHandHasNoMeter: a test's Client literal counts nothing
// and reading its Meter does not panic.
func TestAClientBuiltByHandHasNoMeter(t *testing.T) {
	var c cri.Client
	if got := c.Meter().Counts(); got != nil {
		t.Fatalf("Counts of no meter = %v, want nil", got)
	}
	if c.Meter().Total() != 0 {
		t.Fatal("Total of no meter, want 0")
	}
}
