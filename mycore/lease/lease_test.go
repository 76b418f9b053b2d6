package lease

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubelet-labs/internal/testenv"
)

// These tests run the lease controller against the real control plane and
// watch its requests on the wire: what a learner would see in the
// apiserver's audit log, not what the code's arithmetic says.

func TestMain(m *testing.M) { testenv.Main(m) }

// wire records the lease requests a client makes, and can make the
// apiserver look broken for them (HTTP 500, as an overloaded or
// restarting apiserver answers).
type wire struct {
	mu       sync.Mutex
	requests []request
	failPut  atomic.Bool // lease updates fail
	failAll  atomic.Bool // every lease request fails
}

type request struct {
	at     time.Time
	method string
	status int
}

func (w *wire) wrap(cfg *rest.Config) {
	path := "/apis/coordination.k8s.io/v1/namespaces/" + corev1.NamespaceNodeLease + "/leases"
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if !strings.HasPrefix(req.URL.Path, path) {
				return rt.RoundTrip(req)
			}
			var resp *http.Response
			var err error
			if w.failAll.Load() || (w.failPut.Load() && req.Method == http.MethodPut) {
				resp = &http.Response{
					StatusCode: http.StatusInternalServerError, Request: req,
					Header: http.Header{"Content-Type": {"application/json"}},
					Body: io.NopCloser(strings.NewReader(`{"kind":"Status","apiVersion":"v1","status":"Failure",` +
						`"message":"injected by the test","reason":"InternalError","code":500}`)),
				}
			} else {
				resp, err = rt.RoundTrip(req)
			}
			st := 0
			if resp != nil {
				st = resp.StatusCode
			}
			w.mu.Lock()
			w.requests = append(w.requests, request{at: time.Now(), method: req.Method, status: st})
			w.mu.Unlock()
			return resp, err
		})
	})
}

// since returns the requests with the given method made after t.
func (w *wire) since(t time.Time, method string) []request {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []request
	for _, r := range w.requests {
		if r.at.After(t) && (method == "" || r.method == method) {
			out = append(out, r)
		}
	}
	return out
}

// newNode registers a Node (as admin) and returns a client whose lease
// requests go through a wire.
func newNode(t *testing.T, name string) (kubernetes.Interface, *wire, nodeInfo) {
	t.Helper()
	admin := testenv.AdminClient(t)
	n, err := admin.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	cfg := testenv.AdminConfig(t)
	cfg.QPS = -1 // no client-side rate limit, as the kubelet's heartbeat client
	w := &wire{}
	w.wrap(cfg)
	return kubernetes.NewForConfigOrDie(cfg), w, nodeInfo{admin: admin, uid: string(n.UID)}
}

type nodeInfo struct {
	admin kubernetes.Interface
	uid   string
}

// run starts the controller and returns a stop func that waits for it.
func run(t *testing.T, c Config) (renew time.Duration, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ctl, renew, err := NewController(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { ctl.Run(ctx); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return renew, stop
}

// TestRenewsEveryQuarterOfTheDuration: a 2 s lease is created once, then
// updated every 500 ms (0.25 × 2 s, plus up to 4 % jitter), owned by its
// Node; when the controller's context ends the writes stop and the Lease
// stays (a dead kubelet deletes nothing).
func TestRenewsEveryQuarterOfTheDuration(t *testing.T) {
	client, w, n := newNode(t, "lease-renew")
	start := time.Now()
	renew, stop := run(t, Config{Client: client, NodeName: "lease-renew", LeaseDurationSeconds: 2})
	if renew != 500*time.Millisecond {
		t.Fatalf("renew interval %s, want 500ms", renew)
	}
	time.Sleep(3200 * time.Millisecond)
	stop()
	stopped := time.Now()

	if posts := w.since(start, http.MethodPost); len(posts) != 1 || posts[0].status != http.StatusCreated {
		t.Errorf("creates: %+v, want one 201", posts)
	}
	puts := w.since(start, http.MethodPut)
	if len(puts) < 4 || len(puts) > 7 {
		t.Errorf("%d updates in 3.2 s, want about 6 (one per 500 ms)", len(puts))
	}
	for i := 1; i < len(puts); i++ {
		if gap := puts[i].at.Sub(puts[i-1].at); gap < 450*time.Millisecond || gap > 900*time.Millisecond {
			t.Errorf("update %d came %s after the previous one, want ~500ms", i, gap)
		}
	}
	for _, p := range puts {
		if p.status != http.StatusOK {
			t.Errorf("update answered %d", p.status)
		}
	}

	l, err := n.admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(context.Background(), "lease-renew", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Lease is gone after the controller stopped: %v", err)
	}
	if *l.Spec.HolderIdentity != "lease-renew" || *l.Spec.LeaseDurationSeconds != 2 {
		t.Errorf("lease spec %+v", l.Spec)
	}
	if age := stopped.Sub(l.Spec.RenewTime.Time); age < 0 || age > time.Second {
		t.Errorf("renewTime %s is %s before the stop, want within one interval", l.Spec.RenewTime.Time, age)
	}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" || string(l.OwnerReferences[0].UID) != n.uid {
		t.Errorf("owner references %+v, want the Node (uid %s)", l.OwnerReferences, n.uid)
	}
	time.Sleep(1200 * time.Millisecond)
	if late := w.since(stopped, ""); len(late) != 0 {
		t.Errorf("%d lease requests after the stop", len(late))
	}
}

// TestFailedUpdatesRetryThenWait: when updates fail, the controller tries
// 5 times at once (calling OnRepeatedFailure from the second failure on:
// the kubelet closes its connections there), re-reads the Lease, tries 5
// times more, then waits for the next interval — a bounded burst, not a
// hot loop. When the apiserver answers again, the next interval renews.
func TestFailedUpdatesRetryThenWait(t *testing.T) {
	client, w, n := newNode(t, "lease-retry")
	var repeated atomic.Int32
	run(t, Config{Client: client, NodeName: "lease-retry", LeaseDurationSeconds: 4, OnRepeatedFailure: func() { repeated.Add(1) }})
	waitFor(t, "the lease is created", func() bool { return len(w.since(time.Time{}, http.MethodPost)) == 1 })

	w.failPut.Store(true)
	failing := time.Now()
	time.Sleep(2500 * time.Millisecond) // two intervals of 1 s (0.25 × 4 s)
	w.failPut.Store(false)
	healed := time.Now()

	puts := w.since(failing, http.MethodPut)
	if len(puts) < 10 || len(puts) > 30 {
		t.Errorf("%d failed updates in 2.5 s, want bursts of 10 per 1 s interval", len(puts))
	}
	if gets := w.since(failing, http.MethodGet); len(gets) == 0 {
		t.Error("no GET: after 5 failed updates the controller re-reads the Lease")
	}
	if repeated.Load() < 4 {
		t.Errorf("OnRepeatedFailure called %d times, want 4 per burst of 5", repeated.Load())
	}
	// Bursts: the longest pause between failed updates is about the interval.
	var longest time.Duration
	for i := 1; i < len(puts); i++ {
		longest = max(longest, puts[i].at.Sub(puts[i-1].at))
	}
	if longest < 800*time.Millisecond {
		t.Errorf("longest pause between failed updates %s: no wait for the interval", longest)
	}

	waitFor(t, "a renewal after the apiserver answers again", func() bool {
		l, err := n.admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(context.Background(), "lease-retry", metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.After(healed)
	})
}

// TestGetFailuresBackOff: when even reading the Lease fails (the apiserver
// is down), the controller backs off exponentially — 200 ms, 400 ms,
// 800 ms, 1.6 s … up to 7 s — instead of hammering it, and recovers by
// itself.
func TestGetFailuresBackOff(t *testing.T) {
	client, w, n := newNode(t, "lease-backoff")
	w.failAll.Store(true) // from the very first request: the Lease cannot be read or created
	start := time.Now()
	run(t, Config{Client: client, NodeName: "lease-backoff", LeaseDurationSeconds: 40})
	time.Sleep(3500 * time.Millisecond)

	gets := w.since(start, http.MethodGet)
	// At 0, 0.2, 0.6, 1.4, 3.0 s: five reads in 3.5 s.
	if len(gets) < 4 || len(gets) > 6 {
		t.Errorf("%d reads in 3.5 s, want 5 (backoff 200ms, 400ms, 800ms, 1.6s)", len(gets))
	}
	for i := 2; i < len(gets); i++ {
		prev, gap := gets[i-1].at.Sub(gets[i-2].at), gets[i].at.Sub(gets[i-1].at)
		if gap < prev*3/2 {
			t.Errorf("read %d: gap %s after a gap of %s, want it about doubled", i, gap, prev)
		}
	}
	w.failAll.Store(false)
	healed := time.Now()
	// The next try (3.2 s after the previous one at most) creates it.
	waitFor(t, "the Lease created after the apiserver answers again", func() bool {
		l, err := n.admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(context.Background(), "lease-backoff", metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.After(healed)
	})
}

// TestRefusesBadConfig: a negative duration and a missing client are
// refused; the default is the kubelet's.
func TestRefusesBadConfig(t *testing.T) {
	if _, _, err := (Config{LeaseDurationSeconds: -1}).Durations(); err == nil {
		t.Error("negative lease duration accepted")
	}
	if l, r, err := (Config{}).Durations(); err != nil || l != 40*time.Second || r != 10*time.Second {
		t.Errorf("default: lease %s renew %s (%v), want the kubelet's 40s and 10s", l, r, err)
	}
	if _, _, err := NewController(context.Background(), Config{NodeName: "x"}); err == nil {
		t.Error("a controller without a client was built")
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
