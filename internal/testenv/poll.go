package testenv

import (
	"kubelet-labs/internal/state"
	"testing"
	"time"
)

// Poll calls cond every 50 ms until it returns true, and returns how long
// that took. An error from cond fails the test at once (a condition that can
// never hold, like a pod in the wrong phase for good); timeout fails it with
// what the test was waiting for. The one wait-until helper of every test:
// use it instead of a loop of your own.
func Poll(tb testing.TB, what string, timeout time.Duration, cond func() (bool, error)) time.Duration {
	tb.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			tb.Fatalf("%s: %v", what, err)
		}
		if ok {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// PollTrue is Poll for a condition that cannot fail.
func PollTrue(tb testing.TB, what string, timeout time.Duration, cond func() bool) time.Duration {
	tb.Helper()
	return Poll(tb, what, timeout, func() (bool, error) { return cond(), nil })
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
