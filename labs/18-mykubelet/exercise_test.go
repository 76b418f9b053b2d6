package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/mykubelet"
)

// The exercise: give our kubelet activeDeadlineSeconds (README,
// Exercise). This test runs the lab's node on the mock runtime (no root
// needed) with a pod that would run forever and may be active for 10
// minutes: it must end Failed, reason DeadlineExceeded, its container
// stopped — as a Job's pod with activeDeadlineSeconds does on a real node
// — and not before its 10 minutes are up, counted from status.startTime
// (active_deadline.go:84-97). The test does not wait 10 minutes: the node
// runs on a fake clock (mykubelet.Options.Clock) that keeps up with the
// real one, and the test steps it 10 minutes ahead. So the kubelet must
// read the time from its clock, k.clock, as upstream's
// activeDeadlineHandler reads its m.clock (active_deadline.go:95). Beside
// it, two pods that must keep running: one may be active for an hour, one
// has no deadline.
func TestExercise(t *testing.T) {
	testenv.Exercise(t)
	const node = "t18-deadline"
	const deadline = 10 * time.Minute
	clk := testenv.FollowingClock(t) // before the node: it must keep going until the node has stopped
	startNode(t, node, labruntime.Mock, "", func(o *options) { o.clock = clk })
	admin := testenv.AdminClient(t)
	ns := testenv.Namespace(t, admin, "lab18-exercise")
	pod := func(name string, activeDeadline *int64) *v1.Pod {
		return create(t, admin, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: v1.PodSpec{
				NodeName:              node,
				ActiveDeadlineSeconds: activeDeadline,
				// no token volume: on a loaded machine the Node authorizer may
				// not know the pod yet at its first sync, and the pod would
				// wait for the token's retry before it ever ran
				AutomountServiceAccountToken:  ptr.To(false),
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				RestartPolicy:                 v1.RestartPolicyNever,
				Containers: []v1.Container{{Name: "forever", Image: "localhost/kubelet-labs/busybox:1.35.0",
					Command: []string{"sh", "-c", "trap 'exit 143' TERM; while true; do sleep 1; done"}}},
			},
		})
	}
	started := func(p *v1.Pod) bool { return p.Status.Phase != "" && p.Status.Phase != v1.PodPending }

	// The pods that must keep running start first: whatever a wrong
	// deadline does to the 10-minute pod, it has done to these by the time
	// that one is over.
	keep := []*v1.Pod{pod("hour", ptr.To[int64](3600)), pod("no-deadline", nil)}
	for _, p := range keep {
		// Running, or over already (said below): started, at least
		waitPod(t, admin, ns, p.Name, "started", started)
	}

	// Not before its deadline: the node's clock is seconds past the pod's
	// start, far from its 10 minutes, so it must be running.
	short := pod("deadline", ptr.To(int64(deadline/time.Second)))
	p := waitPod(t, admin, ns, short.Name, "started", started)
	if p.Status.Phase != v1.PodRunning {
		t.Fatalf("%s is %s (reason %q) seconds after it started: before its activeDeadlineSeconds (%s) were up. "+
			"A pod is past its deadline once that much time has passed since status.startTime on the kubelet's clock (active_deadline.go:84-97)",
			short.Name, p.Status.Phase, p.Status.Reason, deadline)
	}

	// Ten minutes later, on the node's clock.
	clk.Step(deadline)
	t.Logf("stepped the node's clock %s ahead, to %s", deadline, clk.Now().Format(time.TimeOnly))
	p = waitPod(t, admin, ns, short.Name, "Failed once the node's clock is 10 minutes past its start (activeDeadlineSeconds: 600; "+
		"the test stepped the node's clock, it did not wait): is pastActiveDeadline (mycore/mykubelet/deadline.go) still always false, "+
		"or does it read time.Now instead of the kubelet's clock, k.clock?", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed
	})
	if p.Status.Reason != mykubelet.DeadlineReason || !strings.Contains(p.Status.Message, "deadline") {
		t.Errorf("Failed with reason %q, message %q; want %q and the kubelet's message", p.Status.Reason, p.Status.Message, mykubelet.DeadlineReason)
	}
	if started, failed := p.Status.StartTime, p.Status.Conditions; started == nil || len(failed) == 0 {
		t.Fatalf("status without a start time or conditions: %+v", p.Status)
	}
	p = waitPod(t, admin, ns, short.Name, "with its container stopped", func(p *v1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Terminated == nil {
				return false
			}
		}
		return len(p.Status.ContainerStatuses) == 1
	})
	stopped := p.Status.ContainerStatuses[0].State.Terminated
	if stopped.StartedAt.IsZero() {
		t.Errorf("the container of %s never ran (status.startTime %s, %s): a pod may be active until its deadline, from status.startTime",
			short.Name, p.Status.StartTime.Format(time.TimeOnly), stopped.Reason)
	}
	t.Logf("%s: %s; status.startTime %s on the node's clock, container stopped (exit code %d)", p.Status.Reason, p.Status.Message,
		p.Status.StartTime.Format(time.TimeOnly), stopped.ExitCode)

	// The others were not touched: a deadline of an hour is not past, and a
	// pod without one has none (active_deadline.go:80-83).
	for _, k := range keep {
		got, err := admin.CoreV1().Pods(ns).Get(context.Background(), k.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != v1.PodRunning {
			t.Errorf("%s (activeDeadlineSeconds %s) is %s, reason %q, started %s: only a pod past its own deadline may be stopped",
				k.Name, deadlineOf(k), got.Status.Phase, got.Status.Reason, got.Status.StartTime)
		}
	}
}

// deadlineOf says a pod's activeDeadlineSeconds.
func deadlineOf(p *v1.Pod) string {
	if p.Spec.ActiveDeadlineSeconds == nil {
		return "none"
	}
	return fmt.Sprintf("%d", *p.Spec.ActiveDeadlineSeconds)
}
