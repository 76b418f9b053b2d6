package main

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelet-labs/internal/labnames"
)

// Lab 13's node runs no containers: what its run leaves is in the API —
// the node, and each example pod's phase, exit codes and messages, which
// the virtual runtime produced and the status manager posted.
func init() {
	register("13", labCheck{Title: "a virtual pod: a node that runs no containers", Check: checkLab13})
}

const (
	lab13Node  = labnames.Node13
	lab13Start = "start the lab: go run ./labs/13-virtual-pod (Run it), and leave it running"
)

func checkLab13(ctx context.Context, e *Env) []Result {
	kube, err := e.Kube(ctx)
	if err != nil {
		return NoCluster(err)
	}
	node, err := liveNode(ctx, kube, lab13Node, lab13Start)
	if err != nil {
		return NoCluster(err)
	}
	get := func(name string) *v1.Pod {
		p, err := kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.Spec.NodeName != lab13Node {
			return nil
		}
		return p
	}
	return []Result{
		node,
		virtualExit("readyz", get("readyz"), "check", v1.PodSucceeded, 0, "200 OK", "kubectl apply -f labs/13-virtual-pod/readyz.yaml (step 1)"),
		virtualExit("forbidden", get("forbidden"), "check", v1.PodFailed, 22, "403 Forbidden", "kubectl apply -f labs/13-virtual-pod/forbidden.yaml (step 2)"),
		typoFailed(get("typo")),
		rejected(get("always")),
		waited(get("wait")),
	}
}

// virtualExit: pod podName reached phase, and its container name ended
// with code and a message that contains msg.
func virtualExit(podName string, pod *v1.Pod, name string, phase v1.PodPhase, code int32, msg, hint string) Result {
	if pod == nil {
		return NotYet("no pod "+podName+" on "+lab13Node, hint)
	}
	t := terminatedState(pod, name)
	if pod.Status.Phase != phase || t == nil || t.ExitCode != code || !strings.Contains(t.Message, msg) {
		return NotYet(fmt.Sprintf("pod %s is %s, container %s: %s", pod.Name, orPending(pod.Status.Phase), name, describeTerminated(t)), hint+"; is the lab running?")
	}
	return Done("pod %s is %s: %s exited %d: %s", pod.Name, phase, name, code, t.Message)
}

// typoFailed: the two containers of typo.yaml — unknown command (127) and
// a bad argument (2).
func typoFailed(pod *v1.Pod) Result {
	hint := "kubectl apply -f labs/13-virtual-pod/typo.yaml (step 2)"
	if pod == nil {
		return NotYet("no pod typo on "+lab13Node, hint)
	}
	curl, noscheme := terminatedState(pod, "curl"), terminatedState(pod, "noscheme")
	if pod.Status.Phase != v1.PodFailed || curl == nil || noscheme == nil || curl.ExitCode != 127 || noscheme.ExitCode != 2 {
		return NotYet(fmt.Sprintf("pod typo is %s: curl %s; noscheme %s", orPending(pod.Status.Phase), describeTerminated(curl), describeTerminated(noscheme)), hint+"; is the lab running?")
	}
	return Done("pod typo is Failed: curl exited 127 (command not found), noscheme exited 2 (usage)")
}

// rejected: always.yaml never reached a worker: admission said no.
func rejected(pod *v1.Pod) Result {
	hint := "kubectl apply -f labs/13-virtual-pod/always.yaml (step 2)"
	if pod == nil {
		return NotYet("no pod always on "+lab13Node, hint)
	}
	if pod.Status.Phase != v1.PodFailed || pod.Status.Reason != "UnsupportedRestartPolicy" || len(pod.Status.ContainerStatuses) > 0 && pod.Status.ContainerStatuses[0].State.Terminated != nil {
		return NotYet(fmt.Sprintf("pod always is %s (reason %q)", orPending(pod.Status.Phase), pod.Status.Reason), hint+"; is the lab running?")
	}
	return Done("pod always was rejected at admission: Failed, %s: %s", pod.Status.Reason, pod.Status.Message)
}

// waited: wait.yaml, applied again in step 4, succeeded once something
// listened on 127.0.0.1:9999 — after several attempts.
func waited(pod *v1.Pod) Result {
	hint := "kubectl apply -f labs/13-virtual-pod/wait.yaml, then serve 127.0.0.1:9999: python3 -u -m http.server 9999 --bind 127.0.0.1 (step 4)"
	if pod == nil {
		return NotYet("no pod wait on "+lab13Node, hint)
	}
	t := terminatedState(pod, "wait")
	if pod.Status.Phase == v1.PodRunning {
		return NotYet("pod wait is Running: its http-get is still trying 127.0.0.1:9999", "serve it: python3 -u -m http.server 9999 --bind 127.0.0.1 (step 4)")
	}
	if pod.Status.Phase != v1.PodSucceeded || t == nil || t.ExitCode != 0 || !strings.Contains(t.Message, "attempts)") {
		return NotYet(fmt.Sprintf("pod wait is %s: %s", orPending(pod.Status.Phase), describeTerminated(t)), "delete it, then "+hint)
	}
	return Done("pod wait is Succeeded: %s", t.Message)
}

// terminatedState is container name's terminated state, or nil.
func terminatedState(pod *v1.Pod, name string) *v1.ContainerStateTerminated {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == name {
			return cs.State.Terminated
		}
	}
	return nil
}

func describeTerminated(t *v1.ContainerStateTerminated) string {
	if t == nil {
		return "not terminated"
	}
	return fmt.Sprintf("exited %d (%s): %s", t.ExitCode, t.Reason, t.Message)
}

func orPending(p v1.PodPhase) v1.PodPhase {
	if p == "" {
		return "without a phase"
	}
	return p
}
