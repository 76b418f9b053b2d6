package main

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kubelet-labs/internal/labnames"
)

func init() {
	register("18", labCheck{Title: "mykubelet: our own kubelet, every piece in one program", Check: check18})
}

const node18 = labnames.Node18

// check18 looks at what lab 18's nodes leave while they run: the single
// node serving, its pods (web Ready with its probes, crash restarting
// behind the back-off, the static pod's mirror), and the fleet's nodes.
func check18(ctx context.Context, e *Env) []Result {
	kube, err := e.Kube(ctx)
	if err != nil {
		return NoCluster(err)
	}
	node, err := kube.CoreV1().Nodes().Get(ctx, node18, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return NoCluster(err)
	}
	return []Result{
		nodeServing(node18, node, err, "start the lab (Run it: one node): go run ./labs/18-mykubelet"),
		webReady(ctx, kube),
		crashLooping(ctx, kube),
		mirrorPod(ctx, kube),
		fleetReady(ctx, kube),
	}
}

func pod18(ctx context.Context, kube kubernetes.Interface, name, hint string) (*v1.Pod, *Result) {
	p, err := kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		r := NotYet(fmt.Sprintf("no pod %s (%v)", name, reasonOf(err)), hint)
		return nil, &r
	}
	if p.Spec.NodeName != node18 {
		r := NotYet(fmt.Sprintf("pod %s is bound to %q, not %s", name, p.Spec.NodeName, node18), hint)
		return nil, &r
	}
	return p, nil
}

func reasonOf(err error) string {
	if apierrors.IsNotFound(err) {
		return "not found"
	}
	return err.Error()
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// webReady: web Running and Ready — its readiness probe passed.
func webReady(ctx context.Context, kube kubernetes.Interface) Result {
	hint := "A web server with probes: kubectl apply -f labs/18-mykubelet/web.yaml, with the node running"
	p, bad := pod18(ctx, kube, "web", hint)
	if bad != nil {
		return *bad
	}
	if p.Status.Phase != v1.PodRunning || !podReady(p) {
		return NotYet(fmt.Sprintf("pod web is %s, ready %t: its node posts no Ready status (is the lab running?)", p.Status.Phase, podReady(p)), hint)
	}
	return Done("pod web Running and Ready on %s, pod IP %s: its readiness probe passed", node18, p.Status.PodIP)
}

// crashLooping: crash restarted by our kubelet, behind the back-off.
func crashLooping(ctx context.Context, kube kubernetes.Interface) Result {
	hint := "A crash loop: kubectl apply -f labs/18-mykubelet/crash.yaml, with the node running"
	p, bad := pod18(ctx, kube, "crash", hint)
	if bad != nil {
		return *bad
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.RestartCount > 0 {
			return Done("pod crash restarted %d times by %s, behind the crash-loop back-off", cs.RestartCount, node18)
		}
	}
	return NotYet("pod crash has not been restarted yet", hint+"; it restarts a few seconds after it exits")
}

// mirrorPod: the static pod's mirror, created by the node.
func mirrorPod(ctx context.Context, kube kubernetes.Interface) Result {
	const name = "clock-" + node18
	hint := "a static pod: cp labs/18-mykubelet/static-clock.yaml into the node's static pod folder (the lab printed it)"
	p, bad := pod18(ctx, kube, name, hint)
	if bad != nil {
		return *bad
	}
	if _, ok := p.Annotations["kubernetes.io/config.mirror"]; !ok {
		return NotYet(fmt.Sprintf("pod %s has no kubernetes.io/config.mirror annotation: it was not made by the node from a file", name), hint)
	}
	if p.Status.Phase != v1.PodRunning {
		return NotYet(fmt.Sprintf("mirror pod %s is %s, not Running", name, p.Status.Phase), hint)
	}
	return Done("mirror pod %s Running: the static pod from the file, as the apiserver sees it", name)
}

// fleetReady: the fleet's nodes (all but the single node carry its label
// too) are Ready.
func fleetReady(ctx context.Context, kube kubernetes.Interface) Result {
	hint := "Fleet mode: go run ./labs/18-mykubelet --nodes 10, in another terminal"
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "kubelet-labs.dev/lab-node=18-mykubelet"})
	if err != nil {
		return NotYet(fmt.Sprintf("list the lab's nodes: %v", err), hint)
	}
	total, ready := 0, 0
	for i := range nodes.Items {
		if n := &nodes.Items[i]; n.Name != node18 {
			total++
			if isReady(n) {
				ready++
			}
		}
	}
	switch {
	case total == 0:
		return NotYet("no fleet nodes (mykubelet-NNNN)", hint)
	case ready == 0:
		return NotYet(fmt.Sprintf("%d fleet nodes, none Ready: the fleet is not running", total), hint)
	}
	return Done("fleet mode: %d of %d nodes mykubelet-NNNN Ready, each with its own kubelet, in one process", ready, total)
}
