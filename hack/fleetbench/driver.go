package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"

	"kubelet-labs/mycore/fleet"
)

// driver is the benchmark's own client: it creates KWOK's nodes, every
// pod, and deletes them, at the same rate for both tools, and watches what
// the tools make of them. It paces itself with its own token bucket and
// stamps each request when it leaves, so that waiting in the bucket is not
// counted as the tool's latency.
type driver struct {
	client  kubernetes.Interface
	limiter flowcontrol.RateLimiter
	calls   *fleet.Calls
	workers int
}

func newDriver(cfg *rest.Config, qps float64, burst int) (*driver, error) {
	c := rest.CopyConfig(cfg)
	c.UserAgent = "kubelet-labs-bench-driver"
	c.QPS = -1 // paced by d.limiter instead, see above
	calls := fleet.NewCalls()
	calls.Wrap(c)
	client, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, err
	}
	return &driver{
		client: client, calls: calls, workers: 64,
		limiter: flowcontrol.NewTokenBucketRateLimiter(float32(qps), burst),
	}, nil
}

// each runs f for 0..n-1 on the driver's workers, each call paced by the
// limiter; f gets the time its request left.
func (d *driver) each(ctx context.Context, n int, f func(ctx context.Context, i int, sent time.Time) error) error {
	return each(ctx, d.workers, n, d.limiter, f)
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
	return d.each(ctx, len(names), func(ctx context.Context, i int, _ time.Time) error {
		_, err := d.client.CoreV1().Nodes().Create(ctx, kwokNode(names[i], i), metav1.CreateOptions{})
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
	nf := informers.NewSharedInformerFactoryWithOptions(d.client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	lf := informers.NewSharedInformerFactoryWithOptions(d.client, 0, informers.WithNamespace(v1.NamespaceNodeLease))
	w.nodes, w.leases = nf.Core().V1().Nodes().Lister(), lf.Coordination().V1().Leases().Lister()
	_, _ = nf.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*v1.Node)
			n, ok2 := newObj.(*v1.Node)
			if ok1 && ok2 && w.want[n.Name] && isReady(o) && !isReady(n) {
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
			if w.want[n.Name] && isReady(n) {
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

func isReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// podRun is what the driver saw of its pods.
type podRun struct {
	mu      sync.Mutex
	sent    map[string]time.Time // create request left
	running map[string]time.Time // first seen Running
	gone    map[string]time.Time // delete event seen
	deleted map[string]bool      // delete request sent
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
func (d *driver) runPods(ctx context.Context, ns string, nodes []string, m int, timeout time.Duration, problem func() error, atAllRunning func(), logf func(string, ...any)) (*podRun, podTimes, error) {
	r := &podRun{sent: map[string]time.Time{}, running: map[string]time.Time{}, gone: map[string]time.Time{}, deleted: map[string]bool{}}
	var t podTimes
	names := make([]string, m)
	for i := range names {
		names[i] = fmt.Sprintf("p-%05d", i)
	}
	f := informers.NewSharedInformerFactoryWithOptions(d.client, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	running := make(chan struct{}, 1)
	gone := make(chan struct{}, 1)
	note := func(obj any) {
		p, ok := obj.(*v1.Pod)
		if !ok || p.Status.Phase != v1.PodRunning {
			return
		}
		r.mu.Lock()
		if _, seen := r.running[p.Name]; !seen {
			r.running[p.Name] = time.Now()
			if len(r.running) == m {
				running <- struct{}{}
			}
		}
		r.mu.Unlock()
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    note,
		UpdateFunc: func(_, obj any) { note(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			p, ok := obj.(*v1.Pod)
			if !ok {
				return
			}
			r.mu.Lock()
			if _, seen := r.gone[p.Name]; !seen && r.deleted[p.Name] {
				r.gone[p.Name] = time.Now()
				if len(r.gone) == m {
					gone <- struct{}{}
				}
			}
			r.mu.Unlock()
		},
	})
	ictx, cancel := context.WithCancel(ctx)
	defer func() { cancel(); f.Shutdown() }()
	f.Start(ictx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return r, t, ctx.Err()
	}

	// Create, round-robin.
	t.createStart = time.Now()
	createErr := make(chan error, 1)
	go func() {
		createErr <- d.each(ctx, m, func(ctx context.Context, i int, sent time.Time) error {
			r.mu.Lock()
			r.sent[names[i]] = sent
			r.mu.Unlock()
			_, err := d.client.CoreV1().Pods(ns).Create(ctx, benchPod(ns, names[i], nodes[i%len(nodes)]), metav1.CreateOptions{})
			return err
		})
	}()
	if err := waitFor(ctx, running, createErr, timeout, problem, func() string {
		r.mu.Lock()
		defer r.mu.Unlock()
		return fmt.Sprintf("%d of %d pods Running", len(r.running), m)
	}, logf); err != nil {
		return r, t, fmt.Errorf("pods: %w", err)
	}
	t.allRunning = time.Now()
	if atAllRunning != nil {
		atAllRunning() // before the first delete: the counts of the creates
	}

	// Delete them all, each with its default grace period, as kubectl
	// delete pods --all does: one DELETE per pod.
	t.deleteStart = time.Now()
	deleteErr := make(chan error, 1)
	go func() {
		deleteErr <- d.each(ctx, m, func(ctx context.Context, i int, _ time.Time) error {
			r.mu.Lock()
			r.deleted[names[i]] = true
			r.mu.Unlock()
			err := d.client.CoreV1().Pods(ns).Delete(ctx, names[i], metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
	}()
	if err := waitFor(ctx, gone, deleteErr, timeout, problem, func() string {
		r.mu.Lock()
		defer r.mu.Unlock()
		return fmt.Sprintf("%d of %d pods gone", len(r.gone), m)
	}, logf); err != nil {
		return r, t, fmt.Errorf("delete: %w", err)
	}
	t.allGone = time.Now()
	return r, t, nil
}

type podTimes struct {
	createStart, allRunning, deleteStart, allGone time.Time
}

// latencies are create → Running of every pod, sorted.
func (r *podRun) latencies() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Duration
	for name, run := range r.running {
		if sent, ok := r.sent[name]; ok {
			out = append(out, max(0, run.Sub(sent)))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// counts are how many pods were seen Running, and gone after their delete.
func (r *podRun) counts() (running, gone int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.running), len(r.gone)
}

// lastRunning is when the last pod was first seen Running.
func (r *podRun) lastRunning() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var last time.Time
	for _, t := range r.running {
		if t.After(last) {
			last = t
		}
	}
	return last
}

// cleanup deletes the run's pods and namespace, then the tool's nodes.
func (d *driver) cleanup(ctx context.Context, selector, ns string, names []string) {
	zero := int64(0)
	_ = d.client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	_ = d.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	d.cleanupNodes(ctx, selector, names)
	_ = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := d.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// cleanupNodes deletes the tool's nodes and waits until they are gone,
// then their Leases: a Lease owned by its Node goes with it, but through
// the garbage collector, later — no later run should see it.
func (d *driver) cleanupNodes(ctx context.Context, selector string, names []string) {
	_ = d.client.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: selector})
	_ = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes, err := d.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: selector})
		return err == nil && len(nodes.Items) == 0, nil
	})
	_ = d.each(ctx, len(names), func(ctx context.Context, i int, _ time.Time) error {
		_ = d.client.CoordinationV1().Leases(v1.NamespaceNodeLease).Delete(ctx, names[i], metav1.DeleteOptions{})
		return nil
	})
}

// ensureNamespace creates ns and waits for its default ServiceAccount
// (the admission plugin refuses pods until the controller made it).
func (d *driver) ensureNamespace(ctx context.Context, ns string) error {
	_, err := d.client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := d.client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}
