package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/internal/labnames"
	"kubelet-labs/mycore/cri"
)

// Lab 12 runs pods on containerd through our pod workers and PLEG. The
// check looks, while the lab runs, at the node, the busybox pod in the API
// and the same pod in containerd (sandbox, container, its restart count
// annotation, the log file containerd wrote), and at the restarts the
// README's kills caused.
func init() {
	register("12", labCheck{Title: "the PLEG over containerd drives the pod workers", Check: checkLab12})
}

const (
	lab12Node  = labnames.Node12
	lab12Start = "start the lab: go run ./labs/12-pleg-containerd (Run it), and leave it running"
	lab12Apply = "kubectl apply -f labs/12-pleg-containerd/busybox.yaml (step 1)"
	lab12Kill  = "kill it from outside twice, 10 s apart at most: crictl stop --timeout 0 … (step 2)"
)

// restartCountAnnotation is the kubelet's container annotation
// (kuberuntime/labels.go) our runtime manager writes too.
const restartCountAnnotation = "io.kubernetes.container.restartCount"

func checkLab12(ctx context.Context, e *Env) []Result {
	kube, err := e.Kube(ctx)
	if err != nil {
		return NoCluster(err)
	}
	node, err := liveNode(ctx, kube, lab12Node, lab12Start)
	if err != nil {
		return NoCluster(err)
	}
	pod, podResult := busyboxRuns(ctx, kube)
	results := []Result{node, podResult}
	c, err := e.CRI(ctx, "")
	if err != nil {
		return append(results,
			NotYet("containerd does not answer: "+err.Error(), "start containerd: sudo scripts/containerd-up.sh (lab 11)"),
			NotYet("no container log to read", "start containerd, then "+lab12Apply),
			restartedFromOutside(pod))
	}
	defer c.Close()
	ctr, inRuntime := busyboxInRuntime(ctx, c, pod)
	return append(results, inRuntime, busyboxLog(ctx, c, ctr), restartedFromOutside(pod))
}

// liveNode: the node is registered, Ready, and its Lease was renewed
// within the lease duration (40 s) — i.e. the lab runs now. An error is
// a cluster that does not answer.
func liveNode(ctx context.Context, kube kubernetes.Interface, name, startHint string) (Result, error) {
	n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return NotYet("no Node "+name+" in the cluster", startHint), nil
	case err != nil:
		return Result{}, err
	}
	ready := isReady(n)
	lease, err := kube.CoordinationV1().Leases("kube-node-lease").Get(ctx, name, metav1.GetOptions{})
	if err != nil || lease.Spec.RenewTime == nil {
		return NotYet("node "+name+" has no renewed Lease", startHint), nil
	}
	age := time.Since(lease.Spec.RenewTime.Time).Round(time.Second)
	if !ready || age > 40*time.Second {
		return NotYet(fmt.Sprintf("node %s is not running: Ready=%v, its Lease last renewed %s ago", name, ready, age), startHint), nil
	}
	return Done("node %s is Ready, its Lease renewed %s ago", name, age), nil
}

// busyboxRuns: the README's pod, Running on the lab's node with a pod IP.
func busyboxRuns(ctx context.Context, kube kubernetes.Interface) (*v1.Pod, Result) {
	pod, err := kube.CoreV1().Pods("default").Get(ctx, "busybox", metav1.GetOptions{})
	if err != nil {
		return nil, NotYet("no pod default/busybox", lab12Apply)
	}
	if pod.Spec.NodeName != lab12Node {
		return nil, NotYet("pod default/busybox is bound to "+pod.Spec.NodeName+", not "+lab12Node, "delete it and "+lab12Apply)
	}
	if pod.Status.Phase != v1.PodRunning || pod.Status.PodIP == "" {
		return pod, NotYet(fmt.Sprintf("pod default/busybox is %s (pod IP %q), not Running with an IP yet", pod.Status.Phase, pod.Status.PodIP), "wait for it: kubectl wait --for=condition=Ready pod/busybox (step 1); is the lab running?")
	}
	return pod, Done("pod default/busybox is Running on %s, pod IP %s", lab12Node, pod.Status.PodIP)
}

// busyboxInRuntime: the same pod in containerd — its sandbox ready with the
// same IP, its container running, the restart count in its annotations
// the same as the API's. It returns the running container.
func busyboxInRuntime(ctx context.Context, c *cri.Client, pod *v1.Pod) (*runtimeapi.Container, Result) {
	if pod == nil {
		return nil, NotYet("no busybox pod in containerd", lab12Apply)
	}
	sbs, err := c.Pods(ctx, map[string]string{cri.LabelPodUID: string(pod.UID)})
	if err != nil {
		return nil, NotYet("ListPodSandbox: "+err.Error(), lab12Apply)
	}
	for _, sb := range sbs {
		if sb.State != runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		ip := ""
		if st, err := c.PodStatus(ctx, sb.Id); err == nil {
			ip = st.GetNetwork().GetIp()
		}
		ctrs, err := c.Containers(ctx, sb.Id)
		if err != nil {
			return nil, NotYet("ListContainers: "+err.Error(), lab12Apply)
		}
		for _, ct := range ctrs {
			if ct.State != runtimeapi.ContainerState_CONTAINER_RUNNING || ct.Metadata.GetName() != "app" {
				continue
			}
			want := apiRestartCount(pod, "app")
			if got := ct.Annotations[restartCountAnnotation]; got != strconv.Itoa(int(want)) {
				return ct, NotYet(fmt.Sprintf("container app %s carries restartCount %q, the API says %d", cri.ShortID(ct.Id), got, want), "wait a second: the status is posted after each sync (is the lab running?)")
			}
			return ct, Done("in containerd: sandbox %s ready, pod IP %s; container app %s running, annotation restartCount=%d", cri.ShortID(sb.Id), ip, cri.ShortID(ct.Id), want)
		}
		return nil, NotYet("sandbox "+cri.ShortID(sb.Id)+" of busybox has no running app container", "wait for the restart (step 2), or "+lab12Apply)
	}
	return nil, NotYet("no ready sandbox of pod default/busybox (uid "+string(pod.UID)+") in containerd", "is the lab running on the course's containerd? "+lab12Start)
}

// busyboxLog: the log file containerd wrote for the running container, in
// the folder the node chose.
func busyboxLog(ctx context.Context, c *cri.Client, ct *runtimeapi.Container) Result {
	if ct == nil {
		return NotYet("no running busybox container, so no log to read", lab12Apply)
	}
	st, err := c.ContainerStatus(ctx, ct.Id)
	if err != nil {
		return NotYet("ContainerStatus: "+err.Error(), lab12Apply)
	}
	lines, err := c.ContainerLog(ctx, ct.Id)
	if err != nil {
		return NotYet("the container's log: "+err.Error(), "read it with cat, as in step 1: is the pod-logs folder yours?")
	}
	for _, l := range lines {
		if strings.HasPrefix(l.Text, "hello from busybox") {
			return Done("containerd wrote %s: %q", st.LogPath, l.Text)
		}
	}
	return NotYet(st.LogPath+" has no greeting (yet)", "wait a second, then make check LAB=12 again")
}

// restartedFromOutside: the two kills of step 2 — restartCount 2 or more,
// and the last one ended by SIGKILL (137).
func restartedFromOutside(pod *v1.Pod) Result {
	if pod == nil {
		return NotYet("no busybox pod, so no restarts", lab12Apply+", then "+lab12Kill)
	}
	n := apiRestartCount(pod, "app")
	last := lastExitCode(pod, "app")
	if n < 2 || last != 137 {
		return NotYet(fmt.Sprintf("pod busybox: RESTARTS %d, last exit code %s", n, exitString(last)), lab12Kill)
	}
	return Done("pod busybox: RESTARTS %d, last exit code 137 (SIGKILL from outside, noticed by the PLEG)", n)
}

func apiRestartCount(pod *v1.Pod, name string) int32 {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == name {
			return cs.RestartCount
		}
	}
	return 0
}

// lastExitCode is the exit code of lastState.terminated, or -1.
func lastExitCode(pod *v1.Pod, name string) int32 {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == name && cs.LastTerminationState.Terminated != nil {
			return cs.LastTerminationState.Terminated.ExitCode
		}
	}
	return -1
}

func exitString(code int32) string {
	if code < 0 {
		return "none"
	}
	return strconv.Itoa(int(code))
}
