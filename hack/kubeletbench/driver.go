package main

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"kubelet-labs/hack/internal/benchkit"
)

// driver is the benchmark's own client (benchkit.Driver): it creates and
// deletes the pods, at the same rate for both kubelets, and watches what
// the kubelet makes of them, on 16 workers.
type driver struct{ *benchkit.Driver }

func newDriver(cfg *rest.Config, qps float64, burst int) (*driver, error) {
	d, err := benchkit.NewDriver(cfg, "kubelet-labs-kubeletbench", qps, burst, 16)
	if err != nil {
		return nil, err
	}
	return &driver{d}, nil
}

// probeCommand is the readiness probe: a built-in of busybox and of the
// mock's shell alike.
var probeCommand = []string{"true"}

// containerCommand runs until SIGTERM and then ends at once: busybox's sh
// as PID 1 would ignore an untrapped SIGTERM and make every delete wait
// out its 30 s grace period, which measures the grace period, not the
// kubelet. The mock's shell runs the same script the same way.
var containerCommand = []string{"sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"}

// benchPod is pod i: busybox, bound to the node (no scheduler), and every
// other pod with an exec readiness probe at its defaults (every 10 s; the
// kubelet runs the first one as soon as the container runs:
// prober_manager.go:351-357, v1.36.3).
func benchPod(ns, node, image string, i int) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%03d", i), Namespace: ns},
		Spec: v1.PodSpec{
			NodeName:                     node,
			AutomountServiceAccountToken: new(bool),
			Containers: []v1.Container{{
				Name: "main", Image: image, ImagePullPolicy: v1.PullIfNotPresent,
				Command: containerCommand,
			}},
		},
	}
	if i%2 == 0 {
		p.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: probeCommand}}}
	}
	return p
}

// runPods creates n pods on node, waits until every one is Running and
// Ready, calls atAllUp, deletes them all (one DELETE each, default grace,
// as kubectl delete does) and waits until all are gone. problem reports
// a kubelet that exited.
func (d *driver) runPods(ctx context.Context, ns, node, image string, n int, timeout time.Duration, problem func() error, atAllUp func(), logf func(string, ...any)) (*benchkit.Pods, error) {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = benchPod(ns, node, image, i)
	}
	return d.RunPods(ctx, benchkit.PodRun{Namespace: ns, Pods: pods, Ready: true, Timeout: timeout, Problem: problem, AtAllUp: atAllUp, Logf: logf})
}

// waitNodeReady waits until the Node is Ready.
func (d *driver) waitNodeReady(ctx context.Context, node string, timeout time.Duration, problem func() error) error {
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := problem(); err != nil {
			return false, err
		}
		n, err := d.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		return err == nil && benchkit.NodeReady(n), nil
	})
	if err != nil && ctx.Err() == nil && wait.Interrupted(err) {
		return fmt.Errorf("node %s not Ready after %s", node, timeout)
	}
	return err
}

// cleanup removes a run's namespace (its pods at once), its Node and the
// node's Lease, and waits until the namespace is gone: the next run
// starts on an empty cluster.
func (d *driver) cleanup(ctx context.Context, ns, node string) {
	d.Cleanup(ctx, ns, func() {
		_ = d.Client.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{})
		_ = d.Client.CoordinationV1().Leases(v1.NamespaceNodeLease).Delete(ctx, node, metav1.DeleteOptions{})
	})
}
