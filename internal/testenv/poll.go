package testenv

import (
	"kubelet-labs/internal/state"
	"testing"
	"time"
)

// pollEvery is how often Poll checks: a tenth of the fastest thing a lab
// waits for over the apiserver, and cheap for a condition that lists pods.
const pollEvery = 50 * time.Millisecond

// Poll calls cond every 50 ms until it returns true, and returns how long
// that took. An error from cond fails the test at once (a condition that can
// never hold, like a pod in the wrong phase for good); timeout fails it with
// what the test was waiting for. The one wait-until helper of every test:
// use it instead of a loop of your own.
func Poll(tb testing.TB, what string, timeout time.Duration, cond func() (bool, error)) time.Duration {
	tb.Helper()
	return PollEvery(tb, what, timeout, pollEvery, cond)
}

// PollEvery is Poll with its own interval, for a test that measures how
// long something took (a 50 ms step would blur a 100 ms measurement).
func PollEvery(tb testing.TB, what string, timeout, every time.Duration, cond func() (bool, error)) time.Duration {
	tb.Helper()
	return poll(tb, what, timeout, every, func() (bool, error, error) {
		ok, err := cond()
		return ok, err, nil
	})
}

// PollTrue is Poll for a condition that cannot fail.
func PollTrue(tb testing.TB, what string, timeout time.Duration, cond func() bool) time.Duration {
	tb.Helper()
	return Poll(tb, what, timeout, func() (bool, error) { return cond(), nil })
}

// PollNil is Poll for a check that returns nil once it holds and otherwise
// why it does not hold yet ("phase Pending", "container still runs"): a
// timeout then says what the test saw last, not only what it waited for.
// An error here never ends the wait early; use Poll for one that should.
func PollNil(tb testing.TB, what string, timeout time.Duration, check func() error) time.Duration {
	tb.Helper()
	return poll(tb, what, timeout, pollEvery, func() (bool, error, error) {
		err := check()
		return err == nil, nil, err
	})
}

// poll is the one loop behind them: cond says done, or fails the test at
// once (fatal), or says why it is not done yet (notYet, kept for the
// timeout's message).
func poll(tb testing.TB, what string, timeout, every time.Duration, cond func() (done bool, fatal, notYet error)) time.Duration {
	tb.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		done, fatal, notYet := cond()
		if fatal != nil {
			tb.Fatalf("%s: %v", what, fatal)
		}
		if done {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			if notYet != nil {
				tb.Fatalf("timed out after %s waiting for %s; last: %v", timeout, what, notYet)
			}
			tb.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(every)
	}
}

// NodeDir is a node's folder in the test's state folder (nodes/NAME), for
// mycore/node.Join.
func NodeDir(tb testing.TB, name string) string {
	tb.Helper()
	dir, err := state.Ensure("nodes", name)
	if err != nil {
		tb.Fatal(err)
	}
	return dir
}
