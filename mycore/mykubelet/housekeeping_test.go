package mykubelet

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/internal/testenv"
)

// TestHousekeepingAfterARestart is a kubelet restart: the containers of a
// node run on while its kubelet is down, and one pod is deleted meanwhile.
// The new kubelet's housekeeping must not act before its pod source has
// delivered its first list — until then every pod looks gone, and killing
// them would stop a whole node's work at each restart. Once the list came,
// the pod that is still wanted runs on untouched (same container, no
// restart) and the one nobody wants any more is killed as an orphan.
//
// The pod source is Options.Updates, fed by the test, so the first list
// comes exactly when the test says; the pods exist in the apiserver too,
// where the status manager posts. The new kubelet's housekeeping ticks
// come from its clock (nodeClock), by hand: the test knows when ten of
// them have been handled, where it slept ten periods and hoped.
func TestHousekeepingAfterARestart(t *testing.T) {
	n := newNode(t, "t-housekeeping")
	ns := n.namespace(t)
	ctx := context.Background()
	opts := Options{HousekeepingPeriod: 100 * time.Millisecond} // the first kubelet's, on the real clock

	keep := n.createPod(t, ns, "keep", 30, "sleep infinity")
	orphan := n.createPod(t, ns, "orphan", 30, "sleep infinity")
	first := make(chan kubetypes.PodUpdate, 1)
	opts.Updates = first
	k1 := n.start(t, opts)
	first <- kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{keep, orphan}}
	keepID := runtimeID(n.runningPod(t, ns, "keep").Status.ContainerStatuses[0])
	orphanID := runtimeID(n.runningPod(t, ns, "orphan").Status.ContainerStatuses[0])

	// The kubelet stops (no graceful shutdown): its containers run on.
	k1.stop(t)
	for _, id := range []string{keepID, orphanID} {
		if st := n.containerState(t, id); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Fatalf("container %s is %s after the kubelet stopped, want RUNNING", id, st.State)
		}
	}
	zero := int64(0)
	if err := n.admin.CoreV1().Pods(ns).Delete(ctx, "orphan", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}

	// A new kubelet whose source has not listed yet: ten housekeepings
	// later nothing has been killed. (The eleventh tick taken means the
	// ten before it were handled.)
	second := make(chan kubetypes.PodUpdate, 1)
	clk := newNodeClock(t, time.Hour)
	opts.Updates, opts.Clock, opts.HousekeepingPeriod = second, clk, clk.hand
	n.start(t, opts)
	for range 11 {
		clk.housekeeping(t)
	}
	for _, id := range []string{keepID, orphanID} {
		if st := n.containerState(t, id); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Fatalf("container %s is %s before the pod source listed: housekeeping acted on pods that only looked gone", id, st.State)
		}
	}

	// The first list: only keep.
	second <- kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{keep}}
	testenv.PollNil(t, "the orphan's container stopped", patient, func() error {
		clk.housekeeping(t) // one per try
		if st := n.containerState(t, orphanID); st.State != runtimeapi.ContainerState_CONTAINER_EXITED {
			return fmt.Errorf("container %s is %s", orphanID, st.State)
		}
		return nil
	})
	if !n.log.has("cleanup", ns+"/orphan", "runtime-only pod") {
		t.Errorf("no log line says housekeeping killed the orphan")
	}
	p := n.runningPod(t, ns, "keep")
	if cs := p.Status.ContainerStatuses[0]; runtimeID(cs) != keepID || cs.RestartCount != 0 {
		t.Errorf("keep shows container %s restartCount %d, want %s never restarted", runtimeID(cs), cs.RestartCount, keepID)
	}
	if st := n.containerState(t, keepID); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("keep's container is %s, want RUNNING", st.State)
	}
	for _, c := range n.containers(t, string(orphan.UID)) {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("container %s of the orphan still runs", c.Id)
		}
	}
}
