package benchkit

import (
	"context"
	"fmt"
	"slices"
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

	"kubelet-labs/mycore/fleet"
)

// Driver is a benchmark's own client: it creates the pods and deletes
// them, at the same rate for every tool, and watches what the tool makes
// of them. It paces itself with its own token bucket and stamps each
// request when it leaves the bucket, so that waiting in the bucket is not
// counted as the tool's latency; its requests are counted (Calls) so that
// they can be taken out of the apiserver's count.
type Driver struct {
	Client  kubernetes.Interface
	Calls   *fleet.Calls
	limiter flowcontrol.RateLimiter
	workers int
}

// NewDriver is a driver on cfg's cluster and credentials, named userAgent,
// sending at most qps requests a second (burst at once) from workers
// goroutines.
func NewDriver(cfg *rest.Config, userAgent string, qps float64, burst, workers int) (*Driver, error) {
	c := rest.CopyConfig(cfg)
	c.UserAgent = userAgent
	c.QPS = -1 // paced by the driver's own limiter instead, see above
	calls := fleet.NewCalls()
	calls.Wrap(c)
	client, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, err
	}
	return &Driver{Client: client, Calls: calls, workers: workers,
		limiter: flowcontrol.NewTokenBucketRateLimiter(float32(qps), burst)}, nil
}

// Each runs f for 0..n-1 on the driver's workers, each call paced by its
// limiter; f gets the time its request left.
func (d *Driver) Each(ctx context.Context, n int, f func(ctx context.Context, i int, sent time.Time) error) error {
	return Each(ctx, d.workers, n, d.limiter, f)
}

// EnsureNamespace creates ns and waits for its default ServiceAccount
// (the admission plugin refuses pods until the controller made it).
func (d *Driver) EnsureNamespace(ctx context.Context, ns string) error {
	_, err := d.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := d.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// Cleanup deletes a run's pods at once and its namespace, then runs nodes
// (the benchmark's removal of the run's nodes; nil for none), and waits,
// up to 3 minutes, until the namespace is gone: the next run starts on an
// empty cluster.
func (d *Driver) Cleanup(ctx context.Context, ns string, nodes func()) {
	zero := int64(0)
	_ = d.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	_ = d.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if nodes != nil {
		nodes()
	}
	_ = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := d.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// PodRun is one run's pods, for RunPods.
type PodRun struct {
	Namespace string
	// Pods are created in this order, all in Namespace, and deleted in it.
	Pods []*v1.Pod
	// Ready: the pods are up when every one is Running and Ready, not only
	// Running.
	Ready bool
	// Timeout is the longest wait for each half (all up, all gone).
	Timeout time.Duration
	// Problem reports a problem with the tool under test (it exited).
	Problem func() error
	// AtAllUp, if not nil, runs once all are up, before the first delete:
	// the counters read then are the creates' cost.
	AtAllUp func()
	Logf    func(string, ...any)
}

// Pods is what the driver saw of one run's pods.
type Pods struct {
	mu      sync.Mutex
	sent    map[string]time.Time // create request left
	probed  map[string]bool      // has a readiness probe
	running map[string]time.Time // first seen Running
	ready   map[string]time.Time // first seen Ready
	deleted map[string]time.Time // delete request left
	gone    map[string]time.Time // delete event seen, after its delete

	// CreateStart is when the first create was sent, AllUp when every pod
	// was seen up; DeleteStart and AllGone the same of the deletes.
	CreateStart, AllUp, DeleteStart, AllGone time.Time
}

// RunPods creates the run's pods, waits until every one is up (Running,
// and with run.Ready Ready too), calls run.AtAllUp, deletes them all and
// waits until all are gone. The deletes are one DELETE per pod with its
// default grace period, as kubectl delete pods --all does. On an error,
// the pods say what was seen until then.
func (d *Driver) RunPods(ctx context.Context, run PodRun) (*Pods, error) {
	n, ns := len(run.Pods), run.Namespace
	t := &Pods{sent: map[string]time.Time{}, probed: map[string]bool{}, running: map[string]time.Time{},
		ready: map[string]time.Time{}, deleted: map[string]time.Time{}, gone: map[string]time.Time{}}
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
		if _, seen := t.ready[p.Name]; !seen && PodReady(p) {
			t.ready[p.Name] = now
		}
		if len(t.running) == n && (!run.Ready || len(t.ready) == n) {
			select {
			case up <- struct{}{}:
			default:
			}
		}
	}
	f := informers.NewSharedInformerFactoryWithOptions(d.Client, 0, informers.WithNamespace(ns))
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

	t.CreateStart = time.Now()
	sendErr := make(chan error, 1)
	go func() {
		sendErr <- d.Each(ctx, n, func(ctx context.Context, i int, sent time.Time) error {
			p := run.Pods[i]
			t.mu.Lock()
			t.sent[p.Name], t.probed[p.Name] = sent, slices.ContainsFunc(p.Spec.Containers, func(c v1.Container) bool { return c.ReadinessProbe != nil })
			t.mu.Unlock()
			_, err := d.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			return err
		})
	}()
	if err := WaitFor(ctx, up, sendErr, run.Timeout, run.Problem, func() string {
		t.mu.Lock()
		defer t.mu.Unlock()
		if run.Ready {
			return fmt.Sprintf("%d of %d pods Running, %d Ready", len(t.running), n, len(t.ready))
		}
		return fmt.Sprintf("%d of %d pods Running", len(t.running), n)
	}, run.Logf); err != nil {
		return t, fmt.Errorf("pods: %w", err)
	}
	t.AllUp = time.Now()
	if run.AtAllUp != nil {
		run.AtAllUp()
	}

	t.DeleteStart = time.Now()
	sendErr = make(chan error, 1)
	go func() {
		sendErr <- d.Each(ctx, n, func(ctx context.Context, i int, sent time.Time) error {
			name := run.Pods[i].Name
			t.mu.Lock()
			t.deleted[name] = sent
			t.mu.Unlock()
			err := d.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
	}()
	if err := WaitFor(ctx, gone, sendErr, run.Timeout, run.Problem, func() string {
		t.mu.Lock()
		defer t.mu.Unlock()
		return fmt.Sprintf("%d of %d pods gone", len(t.gone), n)
	}, run.Logf); err != nil {
		return t, fmt.Errorf("delete: %w", err)
	}
	t.AllGone = time.Now()
	return t, nil
}

// Latencies are, sorted: create → Running of every pod, create → Ready of
// those with a readiness probe, and delete → gone of every pod.
func (t *Pods) Latencies() (running, ready, gone []time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, at := range t.running {
		sent, ok := t.sent[name]
		if !ok {
			continue
		}
		running = append(running, max(0, at.Sub(sent)))
		if r, ok := t.ready[name]; ok && t.probed[name] {
			ready = append(ready, max(0, r.Sub(sent)))
		}
	}
	for name, at := range t.gone {
		gone = append(gone, max(0, at.Sub(t.deleted[name])))
	}
	for _, s := range [][]time.Duration{running, ready, gone} {
		slices.Sort(s)
	}
	return running, ready, gone
}

// Counts are how many pods were seen Running, Ready, and gone after their
// delete.
func (t *Pods) Counts() (running, ready, gone int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.running), len(t.ready), len(t.gone)
}

// LastRunning is when the last pod was first seen Running.
func (t *Pods) LastRunning() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	var last time.Time
	for _, at := range t.running {
		if at.After(last) {
			last = at
		}
	}
	return last
}

// Percentile p (0 to 1) of sorted latencies: the one at rank p×n,
// rounded (0 for none).
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// PodReady reports the pod's Ready condition True.
func PodReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// NodeReady reports the node's Ready condition True.
func NodeReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}
