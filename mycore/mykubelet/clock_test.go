package mykubelet

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"kubelet-labs/internal/testenv"
)

// nodeClock is a node's Options.Clock in tests: a fake clock that keeps up
// with the real one — a goroutine steps it every 10 ms until the test
// ends, so relists, resyncs and kills go on as on the real clock — and
// that a test jumps ahead with Step instead of waiting.
//
// With hand set, the ticker of that period (make it the node's
// HousekeepingPeriod) is the test's own: housekeeping hands the sync loop
// one tick and returns once the loop took it. The loop handles one input
// at a time, so once it took tick n+1, ticks 1 to n have been handled: a
// test can say "n housekeepings later" without sleeping.
type nodeClock struct {
	*testingclock.FakeClock
	hand  time.Duration
	ticks chan time.Time
}

var _ clock.WithTicker = (*nodeClock)(nil)

// newNodeClock starts the clock. Make it after newNode and before the
// node's start: cleanups run last first, and the kubelet, stopping, needs
// the clock still moving (its workers wait for a cache newer than their
// last sync, and the PLEG stamps the cache with this clock).
func newNodeClock(t *testing.T, hand time.Duration) *nodeClock {
	t.Helper()
	c := &nodeClock{FakeClock: testenv.FollowingClock(t), hand: hand, ticks: make(chan time.Time)}
	return c
}

// NewTicker is the fake clock's, but for the hand period: a ticker only
// housekeeping sends on (unbuffered, so a send returns once taken).
func (c *nodeClock) NewTicker(d time.Duration) clock.Ticker {
	if c.hand > 0 && d == c.hand {
		return handTicker(c.ticks)
	}
	return c.FakeClock.NewTicker(d)
}

// housekeeping hands the sync loop one housekeeping tick.
func (c *nodeClock) housekeeping(t *testing.T) {
	t.Helper()
	select {
	case c.ticks <- c.Now():
	case <-time.After(patient):
		t.Fatalf("the sync loop took no housekeeping tick in %s", patient)
	}
}

type handTicker chan time.Time

func (h handTicker) C() <-chan time.Time { return h }
func (h handTicker) Stop()               {}

// TestCrashLoopBackOffOnTheNodesClock: a container that keeps exiting is
// restarted once at once, then waits out its crash-loop back-off
// (CrashLoopBackOff) — here 5 minutes, on the node's clock — and is
// restarted when that clock has passed it (the back-off and the pod
// workers' retry both read Options.Clock). The test steps the clock 5
// minutes instead of waiting them: on the real clock the second restart
// would need the whole back-off (the kubelet's first is 10 s), and this
// one would time out.
func TestCrashLoopBackOffOnTheNodesClock(t *testing.T) {
	const backOff = 5 * time.Minute
	n := newNode(t, "t-backoff-clock")
	clk := newNodeClock(t, 0)
	n.start(t, Options{Clock: clk, BackOffInitial: backOff, BackOffMax: time.Hour})
	ns := n.namespace(t)
	n.createPod(t, ns, "crash", 1, "exit 1")

	status := func(p *v1.Pod) (v1.ContainerStatus, error) {
		if len(p.Status.ContainerStatuses) != 1 {
			return v1.ContainerStatus{}, fmt.Errorf("%d container statuses", len(p.Status.ContainerStatuses))
		}
		return p.Status.ContainerStatuses[0], nil
	}
	// Restarted once at once, then in back-off.
	testenv.PollNil(t, "crash restarted once, then waiting in CrashLoopBackOff", patient, func() error {
		p, err := n.getPod(ns, "crash")
		if err != nil {
			return err
		}
		cs, err := status(p)
		if err != nil {
			return err
		}
		if cs.RestartCount != 1 || cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" {
			return fmt.Errorf("restartCount %d, state %+v", cs.RestartCount, cs.State)
		}
		return nil
	})

	clk.Step(backOff)
	testenv.PollNil(t, "crash restarted a second time once the node's clock passed its 5-minute back-off (the test stepped the clock: "+
		"does the back-off, or the pod workers' retry, read the real time instead of Options.Clock?)", patient, func() error {
		p, err := n.getPod(ns, "crash")
		if err != nil {
			return err
		}
		cs, err := status(p)
		if err != nil {
			return err
		}
		if cs.RestartCount < 2 {
			return fmt.Errorf("restartCount %d, state %+v", cs.RestartCount, cs.State)
		}
		return nil
	})
}
