package testenv

import (
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// FollowingClock is a fake clock that keeps up with the wall clock (a
// step every 10 ms) until the test ends, for a node given it: its relists,
// resyncs and kills go on as on the real clock, and the test jumps it
// ahead with Step instead of waiting. Make it before the node: cleanups
// run last first, and a node's shutdown needs the clock moving.
func FollowingClock(t testing.TB) *testingclock.FakeClock {
	t.Helper()
	last := time.Now()
	clk := testingclock.NewFakeClock(last)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				clk.Step(now.Sub(last))
				last = now
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return clk
}
