package main

import (
	"strings"
	"testing"

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
// stopped — as a Job's pod with activeDeadlineSeconds does on a real node.
func TestExercise(t *testing.T) {
	testenv.Exercise(t)
	const node = "t18-deadline"
	startNode(t, node, labruntime.Mock, "")
	admin := testenv.AdminClient(t)
	ns := testenv.Namespace(t, admin, "lab18-exercise")

	pod := create(t, admin, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "deadline", Namespace: ns},
		Spec: v1.PodSpec{
			NodeName:              node,
			ActiveDeadlineSeconds: ptr.To[int64](3),
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
	waitPod(t, admin, ns, pod.Name, "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	p := waitPod(t, admin, ns, pod.Name, "Failed 3 s after it started (activeDeadlineSeconds: 3): is pastActiveDeadline (mycore/mykubelet/deadline.go) still always false?", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed
	})
	if p.Status.Reason != mykubelet.DeadlineReason || !strings.Contains(p.Status.Message, "deadline") {
		t.Errorf("Failed with reason %q, message %q; want %q and the kubelet's message", p.Status.Reason, p.Status.Message, mykubelet.DeadlineReason)
	}
	if started, failed := p.Status.StartTime, p.Status.Conditions; started == nil || len(failed) == 0 {
		t.Errorf("status without a start time or conditions: %+v", p.Status)
	}
	p = waitPod(t, admin, ns, pod.Name, "with its container stopped", func(p *v1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Terminated == nil {
				return false
			}
		}
		return len(p.Status.ContainerStatuses) == 1
	})
	t.Logf("%s: %s after the deadline, container exit code %d", p.Status.Reason, p.Status.Message, p.Status.ContainerStatuses[0].State.Terminated.ExitCode)
}
