package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
)

// The lease-renew stage's grader: one renewal step (Renewer.sync) against
// a fake clientset whose reactors fail the way an overloaded apiserver
// does, on a clock that records every back-off wait instead of sleeping.
// Upstream lines are k8s.io/component-helpers v0.36.3
// apimachinery/lease/controller.go.

// waitClock is a fake clock whose After returns at once (after moving the
// clock on by d) and remembers d: the back-off is visible, not slept.
type waitClock struct {
	*testingclock.FakeClock
	mu    sync.Mutex
	waits []time.Duration
	// cancelAt > 0: the cancelAt-th wait cancels the step's context and
	// never fires in time — the step must notice ctx.
	cancelAt int
	cancel   context.CancelFunc
	t        *testing.T
}

func (c *waitClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	ch := make(chan time.Time, 1)
	if c.cancelAt > 0 && len(c.waits) == c.cancelAt {
		c.cancel()
		// Fires late only so that code ignoring ctx fails the test
		// instead of hanging it; code that selects on ctx never sees it.
		timer := time.AfterFunc(30*time.Second, func() { ch <- c.Now() })
		c.t.Cleanup(func() { timer.Stop() })
		return ch
	}
	c.FakeClock.Step(d)
	ch <- c.Now()
	return ch
}

// failFunc says whether the n-th request (from 1) of verb on the Lease
// fails, and with what.
type failFunc func(verb string, n int) error

var errInternal = apierrors.NewInternalError(errors.New("injected by the test: apiserver overloaded"))

func failFirst(verb string, times int, err error) failFunc {
	return func(v string, n int) error {
		if v == verb && n <= times {
			return err
		}
		return nil
	}
}

func failAfter(verb string, ok int, err error) failFunc {
	return func(v string, n int) error {
		if v == verb && n > ok {
			return err
		}
		return nil
	}
}

func conflict() error {
	return apierrors.NewConflict(coordinationv1.Resource("leases"), "n1",
		errors.New("the object has been modified; please apply your changes to the latest version and try again"))
}

const stepNode = "n1"

type stepRig struct {
	client   *fake.Clientset
	clock    *waitClock
	r        *Renewer
	mu       sync.Mutex
	requests []string
	repeated int
}

func newStepRig(t *testing.T, leaseExists bool, fail failFunc) *stepRig {
	t.Helper()
	objs := []runtime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: stepNode, UID: "node-uid"}}}
	if leaseExists {
		objs = append(objs, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: stepNode, Namespace: corev1.NamespaceNodeLease, ResourceVersion: "1"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptrTo(stepNode), LeaseDurationSeconds: ptrTo(int32(40)),
				RenewTime: &metav1.MicroTime{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}},
		})
	}
	rig := &stepRig{client: fake.NewClientset(objs...)}
	rig.clock = &waitClock{FakeClock: testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), t: t}
	counts := map[string]int{}
	rig.client.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		rig.mu.Lock()
		defer rig.mu.Unlock()
		verb := a.GetVerb()
		counts[verb]++
		err := fail(verb, counts[verb])
		if err != nil {
			rig.requests = append(rig.requests, verb+"!")
			return true, nil, err
		}
		rig.requests = append(rig.requests, verb)
		return false, nil, nil
	})
	r, err := NewRenewer(context.Background(), Config{
		Client: rig.client, NodeName: stepNode, Clock: rig.clock,
		OnRepeatedFailure: func() { rig.repeated++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	rig.r = r
	return rig
}

func ptrTo[T any](v T) *T { return &v }

func (rig *stepRig) tick(ctx context.Context) {
	rig.clock.Step(10 * time.Second) // a renew interval passes
	rig.r.sync(ctx)
}

func TestRenewStep(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name        string
		leaseExists bool
		fail        failFunc
		ticks       int
		cancelAt    int
		// requests on the Lease in order; "verb!" is one the test failed.
		want     string
		waits    []time.Duration
		repeated int
		fresh    bool // the stored Lease must be renewed at the clock's now
		why      string
	}{
		{
			name: "no Lease yet: get, NotFound, create it, no update", ticks: 1,
			want: "get create", fresh: true,
			why: "upstream's ensureLease creates the Lease when the GET answers NotFound (controller.go:215-229), and sync does not update a Lease it just created (controller.go:176-177)",
		},
		{
			name: "a Lease exists: get it, then update it", leaseExists: true, ticks: 1,
			want: "get update", fresh: true,
			why: "with no latest Lease, sync ensures the Lease (GET) then renews it with an UPDATE (controller.go:174-181)",
		},
		{
			name: "the next tick updates the latest Lease without a get", ticks: 3,
			want: "get create update update", fresh: true,
			why: "sync renews c.latestLease, the answer of the last write, with no GET (controller.go:159-170); a successful update stores its answer there (controller.go:247-249)",
		},
		{
			name: "an update that fails is retried at once, without waiting", leaseExists: true, ticks: 1,
			fail: failFirst("update", 2, errInternal),
			want: "get update! update! update", repeated: 1, fresh: true,
			why: "retryUpdateLease tries up to maxUpdateRetries=5 times in a row with no back-off, and calls onRepeatedHeartbeatFailure from the second failure on (controller.go:241-260)",
		},
		{
			name: "updates keep failing: 5 tries, then get and 5 more, then wait for the next tick", leaseExists: true, ticks: 2,
			fail: failAfter("update", 1, errInternal),
			want: "get update update! update! update! update! update! get update! update! update! update! update!", repeated: 8,
			why: "after 5 failed updates of the latest Lease sync falls back to ensureLease and retryUpdateLease again (controller.go:167-181, maxUpdateRetries=5 at :42); onRepeatedHeartbeatFailure runs for failures 2..5 of each round (controller.go:258-260)",
		},
		{
			name: "409 Conflict: read the current Lease, then update that", leaseExists: true, ticks: 1,
			fail: failFirst("update", 1, conflict()),
			want: "get update! get update", fresh: true,
			why: "a Conflict means the base Lease is stale: retryUpdateLease gets it again with backoffEnsureLease and continues, without counting it as a repeated failure (controller.go:252-256)",
		},
		{
			name: "get fails: back off 200ms, 400ms, 800ms, then create", ticks: 1,
			fail: failFirst("get", 3, errInternal),
			want: "get! get! get! get create", waits: []time.Duration{200 * ms, 400 * ms, 800 * ms}, fresh: true,
			why: "backoffEnsureLease starts at 100ms and doubles before each wait (controller.go:194-207), on the Renewer's clock — never time.After, so the test can see the waits",
		},
		{
			name: "the back-off is capped at 7s", ticks: 1,
			fail:  failFirst("get", 7, errInternal),
			want:  "get! get! get! get! get! get! get! get create",
			waits: []time.Duration{200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 6400 * ms, 7 * time.Second}, fresh: true,
			why: "sleep = minDuration(2*sleep, maxBackoff) with maxBackoff = 7s (controller.go:44,200)",
		},
		{
			name: "create fails: back off, then get and create again", ticks: 1,
			fail: failFirst("create", 1, errInternal),
			want: "get create! get create", waits: []time.Duration{200 * ms}, fresh: true,
			why: "a failed CREATE is an ensureLease error like a failed GET: backoffEnsureLease waits and starts again with the GET (controller.go:225-228, 196-207)",
		},
		{
			name: "ctx cancelled during the back-off: stop, no more requests", ticks: 1, cancelAt: 1,
			fail: failFirst("get", 1, errInternal),
			want: "get!", waits: []time.Duration{200 * ms},
			why: "backoffEnsureLease selects on ctx.Done() and the wait, and returns (nil, false) when ctx is cancelled; sync then updates nothing (controller.go:203-205, 177)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fail := tc.fail
			if fail == nil {
				fail = func(string, int) error { return nil }
			}
			rig := newStepRig(t, tc.leaseExists, fail)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rig.clock.cancelAt, rig.clock.cancel = tc.cancelAt, cancel
			for range tc.ticks {
				rig.tick(ctx)
			}
			rig.mu.Lock()
			got := strings.Join(rig.requests, " ")
			rig.mu.Unlock()
			if got != tc.want {
				t.Errorf("%d renewal step(s): Lease requests\n  got  [%s]\n  want [%s]\n(\"verb!\" = a request the test failed): %s", tc.ticks, got, tc.want, tc.why)
			}
			if fmt.Sprint(rig.clock.waits) != fmt.Sprint(tc.waits) {
				t.Errorf("back-off waits on the Renewer's clock = %v, want %v: %s", rig.clock.waits, tc.waits, tc.why)
			}
			if rig.repeated != tc.repeated {
				t.Errorf("OnRepeatedFailure called %d times, want %d: %s", rig.repeated, tc.repeated, tc.why)
			}
			if !tc.fresh {
				return
			}
			l, err := rig.client.Tracker().Get(coordinationv1.SchemeGroupVersion.WithResource("leases"), corev1.NamespaceNodeLease, stepNode)
			if err != nil {
				t.Fatalf("the node's Lease is not stored after the step: %v (%s)", err, tc.why)
			}
			checkRenewed(t, l.(*coordinationv1.Lease), rig.clock.Now())
			if rig.r.latestLease == nil {
				t.Errorf("latestLease is nil after a successful step: sync keeps the Lease of its last write so the next tick needs no GET (controller.go:175, 248)")
			}
		})
	}
}

// checkRenewed: the Lease a step wrote is the node's, renewed now.
func checkRenewed(t *testing.T, l *coordinationv1.Lease, now time.Time) {
	t.Helper()
	if l.Spec.RenewTime == nil || !l.Spec.RenewTime.Time.Equal(now) {
		t.Errorf("stored Lease renewTime = %v, want the clock's now %v: every write goes through newLease, which stamps renewTime = clock.Now() (controller.go:288)", l.Spec.RenewTime, now)
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != stepNode || l.Spec.LeaseDurationSeconds == nil || *l.Spec.LeaseDurationSeconds != DefaultLeaseDurationSeconds {
		t.Errorf("stored Lease spec holder=%v duration=%v, want holder %q and %ds: build the Lease with r.newLease (controller.go:269-296)",
			l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, stepNode, DefaultLeaseDurationSeconds)
	}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" {
		t.Errorf("stored Lease owner references = %v, want the Node: r.newLease runs the kubelet's SetNodeOwnerFunc (pkg/kubelet/util/nodelease.go:32, v1.36.3)", l.OwnerReferences)
	}
}
