package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"

	"kubelet-labs/hack/internal/benchkit"
	"kubelet-labs/mycore/fleet"
)

// driver is the benchmark's own client: it creates and deletes the pods,
// at the same rate for both kubelets, and watches what the kubelet makes
// of them. Its requests are counted (fleet.Calls) so that they can be
// taken out of the apiserver's count.
type driver struct {
	client  kubernetes.Interface
	limiter flowcontrol.RateLimiter
	calls   *fleet.Calls
}

func newDriver(cfg *rest.Config, qps float64, burst int) (*driver, error) {
	c := rest.CopyConfig(cfg)
	c.UserAgent = "kubelet-labs-kubeletbench"
	c.QPS = -1 // paced by the limiter, which is waited on before the clock starts
	calls := fleet.NewCalls()
	calls.Wrap(c)
	client, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, err
	}
	return &driver{client: client, calls: calls, limiter: flowcontrol.NewTokenBucketRateLimiter(float32(qps), burst)}, nil
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

// podTimes is what the driver saw of one run's pods.
type podTimes struct {
	mu      sync.Mutex
	n       int
	sent    map[string]time.Time // create request left
	running map[string]time.Time // first seen Running
	ready   map[string]time.Time // first seen Ready
	probed  map[string]bool      // has a readiness probe
	deleted map[string]time.Time // delete request left
	gone    map[string]time.Time // delete event seen

	createStart, allUp, deleteStart, allGone time.Time
}

// runPods creates n pods on node, waits until every one is Running and
// Ready, calls atAllUp, deletes them all (one DELETE each, default grace,
// as kubectl delete does) and waits until all are gone. problem reports
// a kubelet that exited.
func (d *driver) runPods(ctx context.Context, ns, node, image string, n int, timeout time.Duration, problem func() error, atAllUp func(), logf func(string, ...any)) (*podTimes, error) {
	t := &podTimes{n: n, sent: map[string]time.Time{}, running: map[string]time.Time{}, ready: map[string]time.Time{},
		probed: map[string]bool{}, deleted: map[string]time.Time{}, gone: map[string]time.Time{}}
	up, gone := make(chan struct{}, 1), make(chan struct{}, 1)
	note := func(obj any) {
		p, ok := obj.(*v1.Pod)
		if !ok {
			return
		}
		now := time.Now()
		t.mu.Lock()
		defer t.mu.Unlock()
		if _, seen := t.running[p.Name]; !seen && p.Status.Phase == v1.PodRunning {
			t.running[p.Name] = now
		}
		if _, seen := t.ready[p.Name]; !seen && isReady(p) {
			t.ready[p.Name] = now
		}
		if len(t.running) == n && len(t.ready) == n {
			select {
			case up <- struct{}{}:
			default:
			}
		}
	}
	f := informers.NewSharedInformerFactoryWithOptions(d.client, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
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
			t.mu.Lock()
			defer t.mu.Unlock()
			if _, sent := t.deleted[p.Name]; sent && t.gone[p.Name].IsZero() {
				t.gone[p.Name] = time.Now()
				if len(t.gone) == n {
					gone <- struct{}{}
				}
			}
		},
	})
	ictx, cancel := context.WithCancel(ctx)
	defer func() { cancel(); f.Shutdown() }()
	f.Start(ictx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return t, ctx.Err()
	}

	t.createStart = time.Now()
	sendErr := make(chan error, 1)
	go func() {
		sendErr <- d.each(ctx, n, func(ctx context.Context, i int) error {
			p := benchPod(ns, node, image, i)
			t.mu.Lock()
			t.sent[p.Name], t.probed[p.Name] = time.Now(), p.Spec.Containers[0].ReadinessProbe != nil
			t.mu.Unlock()
			_, err := d.client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			return err
		})
	}()
	if err := benchkit.WaitFor(ctx, up, sendErr, timeout, problem, func() string {
		t.mu.Lock()
		defer t.mu.Unlock()
		return fmt.Sprintf("%d of %d pods Running, %d Ready", len(t.running), n, len(t.ready))
	}, logf); err != nil {
		return t, fmt.Errorf("pods: %w", err)
	}
	t.allUp = time.Now()
	atAllUp()

	t.deleteStart = time.Now()
	sendErr = make(chan error, 1)
	go func() {
		sendErr <- d.each(ctx, n, func(ctx context.Context, i int) error {
			name := fmt.Sprintf("p-%03d", i)
			t.mu.Lock()
			t.deleted[name] = time.Now()
			t.mu.Unlock()
			err := d.client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
	}()
	if err := benchkit.WaitFor(ctx, gone, sendErr, timeout, problem, func() string {
		t.mu.Lock()
		defer t.mu.Unlock()
		return fmt.Sprintf("%d of %d pods gone", len(t.gone), n)
	}, logf); err != nil {
		return t, fmt.Errorf("delete: %w", err)
	}
	t.allGone = time.Now()
	return t, nil
}

// latencies are, sorted: create → Running of every pod, create → Ready of
// those with a probe, and delete → gone of every pod.
func (t *podTimes) latencies() (running, ready, gone []time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, at := range t.running {
		running = append(running, max(0, at.Sub(t.sent[name])))
		if r, ok := t.ready[name]; ok && t.probed[name] {
			ready = append(ready, max(0, r.Sub(t.sent[name])))
		}
	}
	for name, at := range t.gone {
		gone = append(gone, max(0, at.Sub(t.deleted[name])))
	}
	for _, s := range [][]time.Duration{running, ready, gone} {
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	}
	return running, ready, gone
}

func (t *podTimes) counts() (running, ready, gone int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.running), len(t.ready), len(t.gone)
}

func isReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// each runs f for 0..n-1 on 16 workers, each call paced by the limiter.
func (d *driver) each(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	return benchkit.Each(ctx, 16, n, d.limiter, func(ctx context.Context, i int, _ time.Time) error { return f(ctx, i) })
}

// waitNodeReady waits until the Node is Ready.
func (d *driver) waitNodeReady(ctx context.Context, node string, timeout time.Duration, problem func() error) error {
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := problem(); err != nil {
			return false, err
		}
		n, err := d.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady {
				return c.Status == v1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil && ctx.Err() == nil && wait.Interrupted(err) {
		return fmt.Errorf("node %s not Ready after %s", node, timeout)
	}
	return err
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

// cleanup removes a run's namespace (its pods at once), its Node and the
// node's Lease, and waits until the namespace is gone: the next run
// starts on an empty cluster.
func (d *driver) cleanup(ctx context.Context, ns, node string) {
	zero := int64(0)
	_ = d.client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	_ = d.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	_ = d.client.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{})
	_ = d.client.CoordinationV1().Leases(v1.NamespaceNodeLease).Delete(ctx, node, metav1.DeleteOptions{})
	_ = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := d.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}
