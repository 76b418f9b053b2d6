package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kubelet-labs/internal/critest"
	"kubelet-labs/internal/testenv"
)

// TestKubectlDebugOnContainerd: `kubectl debug --target` adds an ephemeral
// container to a running pod; our kubelet starts it in the target's PID
// namespace (it sees the target's `sleep`), kubectl exec and logs reach
// it, and once it exits it stays exited (ephemeral containers are never
// restarted) while the pod runs on.
func TestKubectlDebugOnContainerd(t *testing.T) {
	testenv.NoLeaks(t)
	critest.Require(t, slices.Contains(critest.Flavours(), "2.2") || !critest.InCI(), "containerd 2.2 is not under test (LABS_CONTAINERD)")
	rt := critest.ContainerdFlavour(t, "2.2")
	const node = "t18-debug"
	startNode(t, node, "containerd-2.2", rt.Endpoint)
	admin := testenv.AdminClient(t)
	ns := testenv.Namespace(t, admin, "lab18-debug")
	testenv.WaitServiceAccount(t, admin, ns)

	create(t, admin, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: v1.PodSpec{
			NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []v1.Container{{Name: "main", Image: rt.BusyboxImage, Command: []string{"sleep", "3600"}}},
		},
	})
	waitPod(t, admin, ns, "app", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })

	kubectl := func(args ...string) string {
		t.Helper()
		out, errOut, code := testenv.Kubectl(t, "", append([]string{"-n", ns}, args...)...)
		if code != 0 {
			t.Fatalf("kubectl %s: exit %d: %s%s", strings.Join(args, " "), code, out, errOut)
		}
		return out
	}
	kubectl("debug", "app", "--image="+rt.BusyboxImage, "--target=main", "--container=debugger", "--",
		"sh", "-c", "echo polo; until [ -e /tmp/done ]; do sleep 1; done")
	ephemeral := func(p *v1.Pod) *v1.ContainerStatus {
		for i := range p.Status.EphemeralContainerStatuses {
			if p.Status.EphemeralContainerStatuses[i].Name == "debugger" {
				return &p.Status.EphemeralContainerStatuses[i]
			}
		}
		return nil
	}
	waitPod(t, admin, ns, "app", "debugger running", func(p *v1.Pod) bool {
		s := ephemeral(p)
		return s != nil && s.State.Running != nil
	})

	// In main's PID namespace: main's sleep is one of its processes.
	if ps := kubectl("exec", "app", "-c", "debugger", "--", "ps", "-o", "args"); !strings.Contains(ps, "sleep 3600") {
		t.Errorf("ps in the debugger does not show the target's process (sleep 3600):\n%s", ps)
	}
	if out := kubectl("exec", "app", "-c", "debugger", "--", "echo", "marco"); strings.TrimSpace(out) != "marco" {
		t.Errorf("kubectl exec -c debugger -- echo marco: %q", out)
	}
	if logs := kubectl("logs", "app", "-c", "debugger"); !strings.Contains(logs, "polo") {
		t.Errorf("kubectl logs -c debugger: %q, want polo", logs)
	}

	// It exits (its own /tmp: not main's): not started again, and the pod
	// keeps running. (`kill 1` would not do: in main's PID namespace, 1 is
	// main's sleep.)
	kubectl("exec", "app", "-c", "debugger", "--", "touch", "/tmp/done")
	p := waitPod(t, admin, ns, "app", "debugger terminated", func(p *v1.Pod) bool {
		s := ephemeral(p)
		return s != nil && s.State.Terminated != nil
	})
	time.Sleep(3 * time.Second) // a few syncs: a restart would show
	p = waitPod(t, admin, ns, "app", "still running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	if s := ephemeral(p); s == nil || s.State.Terminated == nil || s.RestartCount != 0 {
		t.Errorf("the debugger after it exited: %+v; want terminated, never restarted", s)
	}
}
