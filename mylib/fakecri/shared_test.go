package fakecri

import (
	"fmt"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestListsDoNotCopyLabels: what a list costs must not grow with the
// labels and annotations each item carries — they never change, so the
// runtime hands out its own maps (doc.go, "Lists share what never
// changes"). A thousand PLEGs list every second: copying them was 16 %
// of a fleet's CPU (issue 23).
func TestListsDoNotCopyLabels(t *testing.T) {
	allocs := func(labels int) (sandboxes, containers float64) {
		r := newRuntime(t)
		ctx := tctx(t)
		for p := range 4 {
			pod := podConfig(fmt.Sprintf("pod-%d", p))
			for i := range labels {
				pod.Labels[fmt.Sprintf("label-%d", i)] = "value"
				pod.Annotations[fmt.Sprintf("annotation-%d", i)] = "value"
			}
			sb := runPod(t, r, pod)
			cfg := ctrConfig("app")
			cfg.Annotations = map[string]string{}
			for i := range labels {
				cfg.Labels[fmt.Sprintf("label-%d", i)] = "value"
				cfg.Annotations[fmt.Sprintf("annotation-%d", i)] = "value"
			}
			create(t, r, sb, cfg)
		}
		sandboxes = testing.AllocsPerRun(20, func() {
			if _, err := r.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err != nil {
				t.Fatal(err)
			}
		})
		containers = testing.AllocsPerRun(20, func() {
			if _, err := r.ListContainers(ctx, &runtimeapi.ListContainersRequest{}); err != nil {
				t.Fatal(err)
			}
		})
		return sandboxes, containers
	}
	fewS, fewC := allocs(1)
	manyS, manyC := allocs(64)
	if manyS > fewS || manyC > fewC {
		t.Errorf("allocations per list of 4 items: sandboxes %.0f with 1 label each, %.0f with 64; containers %.0f and %.0f: a list copies the labels",
			fewS, manyS, fewC, manyC)
	}

	// And what is shared still reads back as it was created.
	r := newRuntime(t)
	sb := runPod(t, r, podConfig("web"))
	resp, err := r.ListPodSandbox(tctx(t), &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Items[0]; got.Id != sb || got.Labels["app"] != "web" || got.Annotations["note"] != "annotations must come back unchanged" {
		t.Errorf("listed sandbox %s: labels %v, annotations %v", got.Id, got.Labels, got.Annotations)
	}
}
