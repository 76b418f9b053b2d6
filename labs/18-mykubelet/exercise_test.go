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
// needed) with a pod that would run forever and may be active for 3
// seconds: it must end Failed, reason DeadlineExceeded, its container
// stopped — as a Job's pod with activeDeadlineSeconds does on a real node
// — and not before its 3 seconds are up, counted from status.startTime
// (active_deadline.go:84-97). Beside it, two pods that must keep running:
// one may be active for an hour, one has no deadline.
func TestExercise(t *testing.T) {
	testenv.Exercise(t)
	const node = "t18-deadline"
	const deadline = 3 * time.Second
	startNode(t, node, labruntime.Mock, "")
	admin := testenv.AdminClient(t)
	ns := testenv.Namespace(t, admin, "lab18-exercise")
	pod := func(name string, activeDeadline *int64) *v1.Pod {
		return create(t, admin, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: v1.PodSpec{
				NodeName:              node,
				ActiveDeadlineSeconds: activeDeadline,
				// no token volume: on a loaded machine the Node authorizer may
				// not know the pod yet at its first sync, and the token's retry
				// would outlast the 3 s deadline before the pod ever ran
				AutomountServiceAccountToken:  ptr.To(false),
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				RestartPolicy:                 v1.RestartPolicyNever,
				Containers: []v1.Container{{Name: "forever", Image: "localhost/kubelet-labs/busybox:1.35.0",
					Command: []string{"sh", "-c", "trap 'exit 143' TERM; while true; do sleep 1; done"}}},
			},
		})
	}

	// The pods that must keep running start first: whatever a wrong
	// deadline does to the 3 s pod, it has done to these by the time that
	// one is over.
	keep := []*v1.Pod{pod("hour", ptr.To[int64](3600)), pod("no-deadline", nil)}
	for _, p := range keep {
		// Running, or over already (said below): started, at least
		waitPod(t, admin, ns, p.Name, "started", func(p *v1.Pod) bool { return p.Status.Phase != "" && p.Status.Phase != v1.PodPending })
	}

	short := pod("deadline", ptr.To(int64(deadline/time.Second)))
	p := waitPod(t, admin, ns, short.Name, "Failed 3 s after it started (activeDeadlineSeconds: 3): is pastActiveDeadline (mycore/mykubelet/deadline.go) still always false?", func(p *v1.Pod) bool {
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

	// Not before the deadline. The API's times are in whole seconds, the
	// start time rounded down as the kubelet stores it too, so a kubelet
	// that stops the pod at startTime + 3 s shows a stop 3 s or more after
	// it: the container's finishedAt is the failure the node reports, the
	// stop the deadline asked for.
	started := p.Status.StartTime.Time
	stopped := p.Status.ContainerStatuses[0].State.Terminated
	switch {
	case stopped.StartedAt.IsZero():
		t.Errorf("the container of %s never ran (status.startTime %s, %s): a pod may be active until its deadline, from status.startTime",
			short.Name, started.Format(time.TimeOnly), stopped.Reason)
	case stopped.FinishedAt.Sub(started) < deadline:
		t.Errorf("%s was stopped %s after its status.startTime (%s, container finished %s): before its activeDeadlineSeconds (%s) were up. "+
			"The clock starts at status.startTime, and a pod is past its deadline once that much time has passed (active_deadline.go:84-97)",
			short.Name, stopped.FinishedAt.Sub(started), started.Format(time.TimeOnly), stopped.FinishedAt.Format(time.TimeOnly), deadline)
	}
	t.Logf("%s: %s; status.startTime %s, container stopped %s (exit code %d)", p.Status.Reason, p.Status.Message,
		started.Format(time.TimeOnly), stopped.FinishedAt.Format(time.TimeOnly), stopped.ExitCode)

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
