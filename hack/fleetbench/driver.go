package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	coordlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"kubelet-labs/hack/internal/benchkit"
	"kubelet-labs/mycore/fleet"
)

// driver is the benchmark's own client (benchkit.Driver): it creates
// KWOK's nodes, every pod, and deletes them, at the same rate for both
// tools, and watches what the tools make of them, on 64 workers.
type driver struct{ *benchkit.Driver }

func newDriver(cfg *rest.Config, qps float64, burst int) (*driver, error) {
	d, err := benchkit.NewDriver(cfg, "kubelet-labs-bench-driver", qps, burst, 64)
	if err != nil {
		return nil, err
	}
	return &driver{d}, nil
}

// kwokNode is a Node as KWOK's documentation makes one: KWOK finds it by
// its label, makes it Ready, renews its Lease and runs its pods. Each gets
// a /24 of pod IPs, as the fleet's nodes do.
func kwokNode(name string, i int) *v1.Node {
	capacity := fleet.DefaultCapacity()
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{benchLabel: "kwok", "type": "kwok", v1.LabelHostname: name},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		},
		Spec: v1.NodeSpec{PodCIDR: fmt.Sprintf("10.%d.%d.0/24", 128+i/256, i%256)},
		Status: v1.NodeStatus{
			Capacity: capacity, Allocatable: capacity,
			NodeInfo: v1.NodeSystemInfo{KubeletVersion: "kwok-v0.7.0", OperatingSystem: "linux", Architecture: "amd64"},
		},
	}
}

// createNodes creates KWOK's nodes.
func (d *driver) createNodes(ctx context.Context, names []string) error {
	return d.Each(ctx, len(names), func(ctx context.Context, i int, _ time.Time) error {
		_, err := d.Client.CoreV1().Nodes().Create(ctx, kwokNode(names[i], i), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

// nodeWatch follows a tool's nodes from before they exist until the end
// of its run: when every one is Ready with a Lease, and how often one
// stopped being Ready afterwards (its heartbeats fell behind and the node
// lifecycle controller marked it, or the node said so itself).
type nodeWatch struct {
	want           map[string]bool
	nodes          corelisters.NodeLister
	leases         coordlisters.LeaseLister
	stop           func()
	mu             sync.Mutex
	lostReady      int
	nodesLostReady map[string]bool
}

// watchNodes starts watching the nodes named (selected by selector) and
// their Leases.
func (d *driver) watchNodes(ctx context.Context, names []string, selector string) *nodeWatch {
	w := &nodeWatch{want: map[string]bool{}, nodesLostReady: map[string]bool{}}
	for _, n := range names {
		w.want[n] = true
	}
	nf := informers.NewSharedInformerFactoryWithOptions(d.Client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	lf := informers.NewSharedInformerFactoryWithOptions(d.Client, 0, informers.WithNamespace(v1.NamespaceNodeLease))
	w.nodes, w.leases = nf.Core().V1().Nodes().Lister(), lf.Coordination().V1().Leases().Lister()
	_, _ = nf.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*v1.Node)
			n, ok2 := newObj.(*v1.Node)
			if ok1 && ok2 && w.want[n.Name] && benchkit.NodeReady(o) && !benchkit.NodeReady(n) {
				w.mu.Lock()
				w.lostReady++
				w.nodesLostReady[n.Name] = true
				w.mu.Unlock()
			}
		},
	})
	lf.Coordination().V1().Leases().Informer()
	ictx, cancel := context.WithCancel(ctx)
	w.stop = func() { cancel(); nf.Shutdown(); lf.Shutdown() }
	nf.Start(ictx.Done())
	lf.Start(ictx.Done())
	return w
}

// waitReady returns when every node is Ready and has a Lease, or fails
// after timeout (--timeout covers this step too) saying how many were; it
// logs progress every 10 s, as the pod steps do.
func (w *nodeWatch) waitReady(ctx context.Context, timeout time.Duration, problem func() error, logf func(string, ...any)) error {
	logged, ready := time.Now(), 0
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		if err := problem(); err != nil {
			return false, err
		}
		ns, _ := w.nodes.List(labels.Everything())
		ready = 0
		for _, n := range ns {
			if w.want[n.Name] && benchkit.NodeReady(n) {
				if _, err := w.leases.Leases(v1.NamespaceNodeLease).Get(n.Name); err == nil {
					ready++
				}
			}
		}
		if time.Since(logged) >= 10*time.Second {
			logged = time.Now()
			logf("  … %d of %d nodes Ready with a Lease", ready, len(w.want))
		}
		return ready == len(w.want), nil
	})
	if err != nil && ctx.Err() == nil && wait.Interrupted(err) {
		return fmt.Errorf("timed out after %s: %d of %d nodes Ready with a Lease", timeout, ready, len(w.want))
	}
	return err
}

// lost is how many times a node stopped being Ready, and how many nodes did.
func (w *nodeWatch) lost() (times, nodes int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lostReady, len(w.nodesLostReady)
}

// benchPod is the smallest pod that is a real pod to the kubelet: one
// container, bound to its node by the driver (no scheduler in between).
func benchPod(ns, name, node string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{benchLabel: "pod"}},
		Spec: v1.PodSpec{
			NodeName:                     node,
			AutomountServiceAccountToken: new(bool),
			Containers: []v1.Container{{
				Name: "main", Image: "registry.k8s.io/pause:3.10.2",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1m")}},
			}},
		},
	}
}

// runPods creates m pods round-robin over nodes, waits until all are
// Running, deletes them all and waits until all are gone.
func (d *driver) runPods(ctx context.Context, ns string, nodes []string, m int, timeout time.Duration, problem func() error, atAllRunning func(), logf func(string, ...any)) (*benchkit.Pods, error) {
	pods := make([]*v1.Pod, m)
	for i := range pods {
		pods[i] = benchPod(ns, fmt.Sprintf("p-%05d", i), nodes[i%len(nodes)])
	}
	return d.RunPods(ctx, benchkit.PodRun{Namespace: ns, Pods: pods, Timeout: timeout, Problem: problem, AtAllUp: atAllRunning, Logf: logf})
}

// cleanup deletes the run's pods and namespace, then the tool's nodes.
func (d *driver) cleanup(ctx context.Context, selector, ns string, names []string) {
	d.Cleanup(ctx, ns, func() { d.cleanupNodes(ctx, selector, names) })
}

// cleanupNodes deletes the tool's nodes and waits until they are gone,
// then their Leases: a Lease owned by its Node goes with it, but through
// the garbage collector, later — no later run should see it.
func (d *driver) cleanupNodes(ctx context.Context, selector string, names []string) {
	_ = d.Client.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: selector})
	_ = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes, err := d.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: selector})
		return err == nil && len(nodes.Items) == 0, nil
	})
	_ = d.Each(ctx, len(names), func(ctx context.Context, i int, _ time.Time) error {
		_ = d.Client.CoordinationV1().Leases(v1.NamespaceNodeLease).Delete(ctx, names[i], metav1.DeleteOptions{})
		return nil
	})
}
