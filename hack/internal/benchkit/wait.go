package benchkit

import (
	"context"
	"fmt"
	"time"
)

// WaitFor waits for done, failing on the sender's error (nil once all
// is sent), a problem with the tool under test, or the timeout; it logs
// progress every 10 s.
func WaitFor(ctx context.Context, done <-chan struct{}, sendErr <-chan error, timeout time.Duration, problem func() error, progress func() string, logf func(string, ...any)) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	check := time.NewTicker(500 * time.Millisecond)
	defer check.Stop()
	for {
		select {
		case <-done:
			return nil
		case err := <-sendErr:
			if err != nil {
				return err
			}
			sendErr = nil // all sent
		case <-check.C:
			if err := problem(); err != nil {
				return err
			}
		case <-tick.C:
			logf("  … %s", progress())
		case <-deadline.C:
			return fmt.Errorf("timed out after %s: %s", timeout, progress())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
