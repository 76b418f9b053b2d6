package lease

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	testingclock "k8s.io/utils/clock/testing"

	"kubelet-labs/internal/testenv"
)

// These tests run the lease controller against the real control plane and
// watch its requests on the wire: what a learner would see in the
// apiserver's audit log, not what the code's arithmetic says.
//
// Most of them measure real time, because the cadence IS the behaviour and
// the upstream controller's pacing cannot be given a fake clock: its
// renew loop is wait.JitterUntilWithContext, which always uses the real
// clock (k8s.io/apimachinery v0.36.3 pkg/util/wait/backoff.go:223), and its
// get/create backoff is time.After (k8s.io/component-helpers v0.36.3
// apimachinery/lease/controller.go:206). Config.Clock only stamps
// renewTime (controller.go:288): TestRenewTimeIsTheNodesClock steps a fake
// one. The windows are kept to a few renew intervals of a 1 s lease.

func TestMain(m *testing.M) { testenv.Main(m) }

// wire records the lease requests a client makes, and can make the
// apiserver look broken for them (HTTP 500, as an overloaded or
// restarting apiserver answers).
type wire struct {
	mu       sync.Mutex
	requests []request
	failPut  atomic.Bool // lease updates fail
	failAll  atomic.Bool // every lease request fails
	// loseAnswers: so many lease updates reach the apiserver, and their
	// answer never reaches the client (as a timeout on a busy apiserver).
	loseAnswers atomic.Int32
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
				if err == nil && req.Method == http.MethodPut && w.loseAnswers.Add(-1) >= 0 {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					w.record(req.Method, resp.StatusCode)
					return nil, errors.New("injected: the update was applied, its answer lost")
				}
			}
			st := 0
			if resp != nil {
				st = resp.StatusCode
			}
			w.record(req.Method, st)
			return resp, err
		})
	})
}

func (w *wire) record(method string, status int) {
	w.mu.Lock()
	w.requests = append(w.requests, request{at: time.Now(), method: method, status: status})
	w.mu.Unlock()
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

// TestRenewsEveryQuarterOfTheDuration: a 1 s lease is created once, then
// updated every 250 ms (0.25 × 1 s, plus up to 4 % jitter, counted from
// the end of the previous write), owned by its Node; when the controller's
// context ends the writes stop and the Lease stays (a dead kubelet deletes
// nothing).
func TestRenewsEveryQuarterOfTheDuration(t *testing.T) {
	client, w, n := newNode(t, "lease-renew")
	start := time.Now()
	renew, stop := run(t, Config{Client: client, NodeName: "lease-renew", LeaseDurationSeconds: 1})
	if renew != 250*time.Millisecond {
		t.Fatalf("renew interval %s, want 250ms", renew)
	}
	testenv.PollTrue(t, "6 lease updates", 15*time.Second, func() bool { return len(w.since(start, http.MethodPut)) >= 6 })
	stop()
	stopped := time.Now()

	if posts := w.since(start, http.MethodPost); len(posts) != 1 || posts[0].status != http.StatusCreated {
		t.Errorf("creates: %+v, want one 201", posts)
	}
	puts := w.since(start, http.MethodPut)
	var gaps []time.Duration
	for i := 1; i < len(puts); i++ {
		gap := puts[i].at.Sub(puts[i-1].at)
		if gap < 225*time.Millisecond {
			t.Errorf("update %d came %s after the previous one, want >= 250ms", i, gap)
		}
		gaps = append(gaps, gap)
	}
	// The median, not every gap, must be close to 250 ms: on a loaded
	// machine one write may take a while, and the next interval counts
	// from its end.
	slices.Sort(gaps)
	if med := gaps[len(gaps)/2]; med > 400*time.Millisecond {
		t.Errorf("median gap between updates %s (all: %v), want ~250ms", med, gaps)
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
	if *l.Spec.HolderIdentity != "lease-renew" || *l.Spec.LeaseDurationSeconds != 1 {
		t.Errorf("lease spec %+v", l.Spec)
	}
	if age := stopped.Sub(l.Spec.RenewTime.Time); age < 0 || age > 700*time.Millisecond {
		t.Errorf("renewTime %s is %s before the stop, want within one interval", l.Spec.RenewTime.Time, age)
	}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" || string(l.OwnerReferences[0].UID) != n.uid {
		t.Errorf("owner references %+v, want the Node (uid %s)", l.OwnerReferences, n.uid)
	}
	time.Sleep(3 * renew)
	if late := w.since(stopped, ""); len(late) != 0 {
		t.Errorf("%d lease requests after the stop", len(late))
	}
}

// TestRenewTimeIsTheNodesClock: renewTime is what the node's clock
// (Config.Clock) says when it writes, not when the apiserver receives it —
// a node whose clock is wrong writes a wrong renewTime, which is why the
// node lifecycle controller does not compare renewTime with its own clock
// but watches whether it changes.
func TestRenewTimeIsTheNodesClock(t *testing.T) {
	client, _, n := newNode(t, "lease-clock")
	clk := testingclock.NewFakeClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	run(t, Config{Client: client, NodeName: "lease-clock", LeaseDurationSeconds: 1, Clock: clk})
	renewTime := func() (time.Time, bool) {
		l, err := n.admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(context.Background(), "lease-clock", metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil {
			return time.Time{}, false
		}
		return l.Spec.RenewTime.Time, true
	}
	for _, step := range []time.Duration{0, time.Hour} {
		clk.Step(step)
		want := clk.Now()
		testenv.PollTrue(t, "renewTime "+want.String(), 15*time.Second, func() bool { rt, ok := renewTime(); return ok && rt.Equal(want) })
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
	run(t, Config{Client: client, NodeName: "lease-retry", LeaseDurationSeconds: 1, OnRepeatedFailure: func() { repeated.Add(1) }})
	testenv.PollTrue(t, "the lease is created", 15*time.Second, func() bool { return len(w.since(time.Time{}, http.MethodPost)) == 1 })

	// A renewal that succeeds is one PUT, so failing PUTs from now on makes
	// every later renewal fail from its start: the failed PUTs come in
	// whole bursts. Two of them, then the apiserver answers again.
	// (An update already on its way when the failures start succeeds:
	// only the failed ones count.)
	w.failPut.Store(true)
	failing := time.Now()
	failed := func() []request {
		var out []request
		for _, p := range w.since(failing, http.MethodPut) {
			if p.status == http.StatusInternalServerError {
				out = append(out, p)
			}
		}
		return out
	}
	testenv.PollTrue(t, "20 failed updates", 15*time.Second, func() bool { return len(failed()) >= 20 })
	w.failPut.Store(false)
	healed := time.Now()

	puts := failed()[:20]
	if gets := w.since(failing, http.MethodGet); len(gets) < 2 {
		t.Errorf("%d GETs: after 5 failed updates the controller re-reads the Lease, once per renewal", len(gets))
	}
	if n := repeated.Load(); n < 8 {
		t.Errorf("OnRepeatedFailure called %d times after a whole renewal failed, want 8 (from the 2nd failure of each 5 on)", n)
	}
	// The 10th and 11th failures are two renewals: the interval between them.
	if pause := puts[10].at.Sub(puts[9].at); pause < 200*time.Millisecond {
		t.Errorf("pause after 10 failed updates %s: no wait for the interval (a hot loop)", pause)
	}

	testenv.PollTrue(t, "a renewal after the apiserver answers again", 15*time.Second, func() bool {
		l, err := n.admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(context.Background(), "lease-retry", metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.After(healed)
	})
}

// TestLostAnswerConflictsUnlessReadBack: an update the apiserver applied
// but whose answer the node never got (its 10 s heartbeat timeout on a
// busy apiserver). The upstream controller retries at once with the
// resourceVersion it had — 409 Conflict, then a GET and the PUT again.
// With ReadAfterUnknownUpdate (fleet mode) the node reads the Lease first:
// no 409, and the renewals go on.
func TestLostAnswerConflictsUnlessReadBack(t *testing.T) {
	for _, readBack := range []bool{false, true} {
		name := map[bool]string{false: "lease-lost-upstream", true: "lease-lost-readback"}[readBack]
		t.Run(name, func(t *testing.T) {
			client, w, _ := newNode(t, name)
			run(t, Config{Client: client, NodeName: name, LeaseDurationSeconds: 1, ReadAfterUnknownUpdate: readBack})
			testenv.PollTrue(t, "a renewal", 15*time.Second, func() bool { return len(w.since(time.Time{}, http.MethodPut)) >= 1 })
			lost := time.Now()
			w.loseAnswers.Store(1)
			renewed := func() int {
				n := 0
				for _, p := range w.since(lost, http.MethodPut) {
					if p.status == http.StatusOK {
						n++
					}
				}
				return n
			}
			testenv.PollTrue(t, "4 renewals after the lost answer", 15*time.Second, func() bool { return renewed() >= 4 })
			conflicts := 0
			for _, p := range w.since(lost, http.MethodPut) {
				if p.status == http.StatusConflict {
					conflicts++
				}
			}
			gets := len(w.since(lost, http.MethodGet))
			switch {
			case !readBack && (conflicts != 1 || gets != 1):
				t.Errorf("upstream controller: %d conflicts and %d GETs after a lost answer, want 1 and 1", conflicts, gets)
			case readBack && (conflicts != 0 || gets != 1):
				t.Errorf("read back: %d conflicts and %d GETs after a lost answer, want 0 and 1", conflicts, gets)
			case readBack:
				// The read waits for the lost write to land (readBackDelay).
				lostPut, get := w.since(lost, http.MethodPut)[0], w.since(lost, http.MethodGet)[0]
				if waited := get.at.Sub(lostPut.at); waited < readBackDelay {
					t.Errorf("read back %s after the lost answer, want at least %s", waited, readBackDelay)
				}
			}
		})
	}
}

// TestGetFailuresBackOff: when even reading the Lease fails (the apiserver
// is down), the controller backs off exponentially — 200 ms, 400 ms,
// 800 ms, 1.6 s … up to 7 s — instead of hammering it, and recovers by
// itself: reads at 0, 0.2 and 0.6 s fail, the apiserver comes back, and the
// read at 1.4 s finds no Lease and creates it.
func TestGetFailuresBackOff(t *testing.T) {
	client, w, n := newNode(t, "lease-backoff")
	w.failAll.Store(true) // from the very first request: the Lease cannot be read or created
	start := time.Now()
	run(t, Config{Client: client, NodeName: "lease-backoff", LeaseDurationSeconds: 40})
	testenv.PollTrue(t, "three failed reads", 15*time.Second, func() bool { return len(w.since(start, http.MethodGet)) >= 3 })
	w.failAll.Store(false)
	healed := time.Now()
	testenv.PollTrue(t, "the Lease created after the apiserver answers again", 15*time.Second, func() bool {
		l, err := n.admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(context.Background(), "lease-backoff", metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.After(healed)
	})

	gets := w.since(start, http.MethodGet)
	if len(gets) != 4 {
		t.Fatalf("%d reads before the Lease was created, want 4 (3 failed, then one 404 and the create)", len(gets))
	}
	for i, g := range gets {
		if want := map[bool]int{true: http.StatusInternalServerError, false: http.StatusNotFound}[i < 3]; g.status != want {
			t.Errorf("read %d answered %d, want %d", i, g.status, want)
		}
	}
	for i := 2; i < len(gets); i++ {
		prev, gap := gets[i-1].at.Sub(gets[i-2].at), gets[i].at.Sub(gets[i-1].at)
		if gap < prev*3/2 {
			t.Errorf("read %d: gap %s after a gap of %s, want it about doubled", i, gap, prev)
		}
	}
	if first := gets[1].at.Sub(gets[0].at); first < 150*time.Millisecond {
		t.Errorf("second read %s after the first, want the backoff's 200ms", first)
	}
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
