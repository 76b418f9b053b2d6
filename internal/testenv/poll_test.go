package testenv

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fatalTB records the message a helper fails a test with, and stops the
// goroutine there as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// failure runs fn with a fatalTB and returns what it failed with ("" if
// it returned).
func failure(t *testing.T, fn func(tb testing.TB)) string {
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); fn(f) }()
	<-done
	return f.msg
}

func TestPollNilSaysWhatItSawLast(t *testing.T) {
	n := 0
	msg := failure(t, func(tb testing.TB) {
		PollNil(tb, "the pod Running", 200*time.Millisecond, func() error { n++; return fmt.Errorf("phase Pending (check %d)", n) })
	})
	if !strings.Contains(msg, "waiting for the pod Running") || !strings.Contains(msg, fmt.Sprintf("last: phase Pending (check %d)", n)) {
		t.Errorf("timeout message %q: want what it waited for and the last reason", msg)
	}
	n = 0
	msg = failure(t, func(tb testing.TB) {
		PollNil(tb, "the third check", time.Minute, func() error {
			if n++; n < 3 {
				return errors.New("not yet")
			}
			return nil
		})
	})
	if msg != "" || n != 3 {
		t.Errorf("after %d checks: %q, want done at the third", n, msg)
	}
}

func TestWaitLine(t *testing.T) {
	var out Lines
	fmt.Fprintln(&out, "runtime   ready")
	fmt.Fprintln(&out, "PLEG      ContainerStarted lab/web nginx\nPLEG      ContainerDied lab/web nginx")
	at := out.WaitLine(t, time.Minute, "ContainerDied", "nginx")
	if want, _ := out.First(time.Time{}, "ContainerDied"); !at.Equal(want) {
		t.Errorf("WaitLine returned %s, want when the line was written, %s", at, want)
	}
	msg := failure(t, func(tb testing.TB) { out.WaitLine(tb, 100*time.Millisecond, "ContainerDied", "sidecar") })
	if !strings.Contains(msg, `["ContainerDied" "sidecar"]`) {
		t.Errorf("timeout message %q: want the parts it looked for", msg)
	}
}
