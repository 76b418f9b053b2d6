package mykubelet

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"kubelet-labs/internal/testenv"
)

// TestResizeInPlaceOnContainerd: `kubectl patch --subresource resize` gives
// a running container more CPU and memory. The container whose
// resizePolicy is NotRequired (the default) keeps running and its cgroup
// has the new quota and memory limit; the one that says RestartContainer
// for memory is restarted with them. The status shows the new resources,
// observedGeneration catches up, and no PodResizeInProgress is left — what
// upstream's in-place resize conformance tests wait for.
func TestResizeInPlaceOnContainerd(t *testing.T) {
	n, rt := newContainerdNode(t, "t-resize")
	n.start(t, Options{})
	ns := n.namespace(t)
	ctx := context.Background()

	resources := func(cpuReq, cpuLim, memReq, memLim string) v1.ResourceRequirements {
		return v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpuReq), v1.ResourceMemory: resource.MustParse(memReq)},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpuLim), v1.ResourceMemory: resource.MustParse(memLim)},
		}
	}
	container := func(name string, policy v1.ResourceResizeRestartPolicy) v1.Container {
		return v1.Container{
			Name: name, Image: rt.BusyboxImage, Command: []string{"sh", "-c", "trap exit TERM; while true; do sleep 1; done"},
			Resources:    resources("20m", "30m", "35Mi", "45Mi"),
			ResizePolicy: []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: policy}},
		}
	}
	_, err := n.admin.CoreV1().Pods(ns).Create(ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "resize", Namespace: ns},
		Spec: v1.PodSpec{NodeName: n.name, Containers: []v1.Container{
			container("inplace", v1.NotRequired), container("restarts", v1.RestartContainer),
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var before *v1.Pod
	testenv.PollNil(t, "pod resize Running with both containers", patient, func() error {
		if before, err = n.getPod(ns, "resize"); err != nil {
			return err
		}
		return bothRunning(before)
	})

	patch := `{"spec":{"containers":[` +
		`{"name":"inplace","resources":{"requests":{"cpu":"25m","memory":"40Mi"},"limits":{"cpu":"35m","memory":"50Mi"}}},` +
		`{"name":"restarts","resources":{"requests":{"cpu":"25m","memory":"40Mi"},"limits":{"cpu":"35m","memory":"50Mi"}}}]}}`
	if _, err := n.admin.CoreV1().Pods(ns).Patch(ctx, "resize", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "resize"); err != nil {
		t.Fatal(err)
	}

	want := resources("25m", "35m", "40Mi", "50Mi")
	var after *v1.Pod
	testenv.PollNil(t, "the resize actuated and reported", patient, func() error {
		if after, err = n.getPod(ns, "resize"); err != nil {
			return err
		}
		if after.Status.ObservedGeneration < after.Generation {
			return fmt.Errorf("observedGeneration %d < generation %d", after.Status.ObservedGeneration, after.Generation)
		}
		for _, c := range after.Status.Conditions {
			if c.Type == v1.PodResizeInProgress || c.Type == v1.PodResizePending {
				return fmt.Errorf("condition %s is still there", c.Type)
			}
		}
		if err := bothRunning(after); err != nil {
			return err
		}
		for _, cs := range after.Status.ContainerStatuses {
			if cs.Resources == nil || !equalResources(*cs.Resources, want) {
				return fmt.Errorf("%s: status resources %v, want %v", cs.Name, cs.Resources, want)
			}
			if got := cs.AllocatedResources; !equalList(got, want.Requests) {
				return fmt.Errorf("%s: allocatedResources %v, want %v", cs.Name, got, want.Requests)
			}
		}
		return nil
	})

	restarts := map[string]int32{}
	ids := map[string]string{}
	for _, cs := range after.Status.ContainerStatuses {
		restarts[cs.Name], ids[cs.Name] = cs.RestartCount, runtimeID(cs)
	}
	if restarts["inplace"] != 0 || restarts["restarts"] != 1 {
		t.Errorf("restart counts %v, want inplace 0 (NotRequired) and restarts 1 (RestartContainer for memory)", restarts)
	}
	// In the containers' cgroups (v2, or v1 as on these machines).
	for name, id := range ids {
		quota := n.execIn(t, id, "cat /sys/fs/cgroup/cpu.max 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us")
		mem := n.execIn(t, id, "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes")
		if !strings.HasPrefix(quota, "3500") || mem != fmt.Sprint(50<<20) {
			t.Errorf("%s: cgroup CPU quota %q, memory limit %q; want 3500 (35m of a 100 ms period), %d", name, quota, mem, 50<<20)
		}
	}
	if !n.log.has("CRI UpdateContainerResources resize/inplace") {
		t.Errorf("the kubelet's log has no UpdateContainerResources of inplace")
	}
}

func bothRunning(p *v1.Pod) error {
	if p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) != 2 {
		return fmt.Errorf("phase %s, %d container statuses", p.Status.Phase, len(p.Status.ContainerStatuses))
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil || !cs.Ready {
			return fmt.Errorf("%s is not running and ready: %+v", cs.Name, cs.State)
		}
	}
	return nil
}

func equalResources(a, b v1.ResourceRequirements) bool {
	return equalList(a.Requests, b.Requests) && equalList(a.Limits, b.Limits)
}

func equalList(a, b v1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

// execIn runs script in a container through CRI ExecSync and returns its
// output, trimmed.
func (n *testNode) execIn(t *testing.T, id, script string) string {
	t.Helper()
	stdout, stderr, err := n.cri.Runtime.ExecSync(context.Background(), id, []string{"sh", "-c", script}, 10*time.Second)
	if err != nil {
		t.Fatalf("exec %q in %s: %v: %s", script, id, err, stderr)
	}
	return strings.TrimSpace(string(stdout))
}
