package main

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/internal/labnames"
	"kubelet-labs/mycore/cri"
)

// Lab 17's pods each show one decision of syncPod; while the lab runs,
// the API has what each decision left — restarts and their exit codes,
// the Ready and Started flags, the phases of the restart policies — and
// containerd the stopped sandbox of the pod that is over.
func init() {
	register("17", labCheck{Title: "syncPod: computePodActions, restarts and probes", Check: checkLab17})
}

const (
	lab17Node  = labnames.Node17
	lab17Start = "start the lab: go run ./labs/17-sync-pod (Run it), and leave it running"
)

func checkLab17(ctx context.Context, e *Env) []Result {
	kube, err := e.Kube(ctx)
	if err != nil {
		return NoCluster(err)
	}
	node, err := liveNode(ctx, kube, lab17Node, lab17Start)
	if err != nil {
		return NoCluster(err)
	}
	get := func(name string) *v1.Pod {
		p, err := kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.Spec.NodeName != lab17Node {
			return nil
		}
		return p
	}
	liveness := get("liveness")
	results := []Result{
		node,
		restartedBy(liveness, "liveness", 1, 143, "touch /tmp/sick in it (step 1)"),
		readinessFlipped(get("readiness")),
		startupPassed(get("startup")),
	}
	// web.yaml needs real processes and a pod network: not on the mock.
	onMock := onMockRuntime(liveness)
	if !onMock {
		results = append(results, restartedBy(get("web"), "web", 1, -1, "kill its TCP server: crictl exec … killall nc (step 4)"))
	}
	return append(results,
		restartedBy(get("crashloop"), "crashloop", 5, 1, "wait for RESTARTS 5: the back-off doubles 1 s, 2 s, 4 s, 8 s (step 5)"),
		policiesEnded(ctx, e, get("never"), get("onfailure"), onMock),
		specChanged(liveness),
	)
}

// onMockRuntime: the lab runs with --runtime mock, as the container IDs
// its node reports say (fakecri://…, not containerd://…).
func onMockRuntime(pod *v1.Pod) bool {
	cs := container(pod)
	return cs != nil && strings.HasPrefix(cs.ContainerID, "fakecri://")
}

// container is the pod's one container's status, or nil.
func container(pod *v1.Pod) *v1.ContainerStatus {
	if pod == nil || len(pod.Status.ContainerStatuses) != 1 {
		return nil
	}
	return &pod.Status.ContainerStatuses[0]
}

// restartedBy: pod name's container restarted at least n times and runs
// again; its last run ended with exit code exit (-1: any).
func restartedBy(pod *v1.Pod, name string, n int32, exit int32, step string) Result {
	hint := "kubectl apply -f labs/17-sync-pod/" + name + ".yaml, then " + step
	cs := container(pod)
	if cs == nil {
		return NotYet("no pod "+name+" on "+lab17Node, hint)
	}
	last := lastExitCode(pod, cs.Name)
	if cs.RestartCount < n || exit >= 0 && last != exit {
		return NotYet(fmt.Sprintf("pod %s: RESTARTS %d, last exit code %s", name, cs.RestartCount, exitString(last)), step)
	}
	return Done("pod %s: RESTARTS %d, last exit code %d", name, cs.RestartCount, last)
}

// readinessFlipped: readiness.yaml's Ready condition changed after its
// container started (the file made it ready, or removing it unready) —
// with no restart.
func readinessFlipped(pod *v1.Pod) Result {
	hint := "kubectl apply -f labs/17-sync-pod/readiness.yaml, then touch and rm /tmp/ready in it (step 2)"
	cs := container(pod)
	if cs == nil || cs.State.Running == nil {
		return NotYet("no running pod readiness on "+lab17Node, hint)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type != v1.PodReady {
			continue
		}
		if cs.RestartCount == 0 && (c.Status == v1.ConditionTrue || c.LastTransitionTime.After(cs.State.Running.StartedAt.Time)) {
			return Done("pod readiness: Ready=%s since %s, RESTARTS 0 (readiness restarts nothing)", c.Status, c.LastTransitionTime.Format("15:04:05"))
		}
		return NotYet(fmt.Sprintf("pod readiness: Ready=%s since it started, RESTARTS %d", c.Status, cs.RestartCount), hint)
	}
	return NotYet("pod readiness has no Ready condition yet", hint)
}

// startupPassed: startup.yaml's startup probe succeeded, and only then
// the readiness probe made it ready.
func startupPassed(pod *v1.Pod) Result {
	hint := "kubectl apply -f labs/17-sync-pod/startup.yaml, then touch /tmp/started in it (step 3)"
	cs := container(pod)
	if cs == nil {
		return NotYet("no pod startup on "+lab17Node, hint)
	}
	started := cs.Started != nil && *cs.Started
	if !started || !cs.Ready {
		return NotYet(fmt.Sprintf("pod startup: started=%v ready=%v", started, cs.Ready), hint)
	}
	return Done("pod startup: started=true ready=true")
}

// policiesEnded: policies.yaml — never Failed with exit 3, onfailure
// Succeeded, neither restarted; in containerd the never pod's sandbox is
// stopped (the pod is over).
func policiesEnded(ctx context.Context, e *Env, never, onfailure *v1.Pod, onMock bool) Result {
	hint := "kubectl apply -f labs/17-sync-pod/policies.yaml (step 6)"
	n, o := container(never), container(onfailure)
	if n == nil || o == nil {
		return NotYet("pods never and onfailure are not both on "+lab17Node, hint)
	}
	t := n.State.Terminated
	if never.Status.Phase != v1.PodFailed || t == nil || t.ExitCode != 3 || n.RestartCount != 0 ||
		onfailure.Status.Phase != v1.PodSucceeded || o.RestartCount != 0 {
		return NotYet(fmt.Sprintf("never is %s (RESTARTS %d), onfailure is %s (RESTARTS %d)", orPending(never.Status.Phase), n.RestartCount, orPending(onfailure.Status.Phase), o.RestartCount),
			"wait for them: kubectl wait --for=jsonpath='{.status.phase}'=Failed pod/never (step 6)")
	}
	if onMock {
		return Done("never is Failed (exit 3), onfailure Succeeded (exit 0), RESTARTS 0 both")
	}
	sandbox := "containerd does not answer"
	if c, err := e.CRI(ctx, ""); err == nil {
		defer c.Close()
		sandbox = sandboxState(ctx, c, never)
	}
	return Done("never is Failed (exit 3), onfailure Succeeded (exit 0), RESTARTS 0 both; never's sandbox in containerd: %s", sandbox)
}

// sandboxState names the pod's sandboxes' states in the runtime.
func sandboxState(ctx context.Context, c *cri.Client, pod *v1.Pod) string {
	sbs, err := c.Pods(ctx, map[string]string{cri.LabelPodUID: string(pod.UID)})
	if err != nil || len(sbs) == 0 {
		return "none (the garbage collector removed it)"
	}
	var states []string
	for _, sb := range sbs {
		s := "NotReady"
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			s = "Ready"
		}
		states = append(states, cri.ShortID(sb.Id)+" "+s)
	}
	return strings.Join(states, ", ")
}

// specChanged: step 7 set liveness's image to the busybox's ID, a new
// spec hash: the container was restarted with it.
func specChanged(pod *v1.Pod) Result {
	hint := "kubectl set image pod/liveness app=<the busybox image's ID> (step 7)"
	cs := container(pod)
	if cs == nil {
		return NotYet("no pod liveness on "+lab17Node, "kubectl apply -f labs/17-sync-pod/liveness.yaml (step 1), then "+hint)
	}
	image := pod.Spec.Containers[0].Image
	if !strings.HasPrefix(image, "sha256:") || cs.State.Running == nil || cs.RestartCount < 2 {
		return NotYet(fmt.Sprintf("pod liveness runs image %s, RESTARTS %d", image, cs.RestartCount), hint)
	}
	return Done("pod liveness: image %.19s…, restarted for the new spec hash (RESTARTS %d)", image, cs.RestartCount)
}
