package testenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// RunFunc is the shape of a lab's run function as its test calls it: run
// until ctx ends, print to out, and hand the test what it needs (L) once
// everything is up.
type RunFunc[L any] func(ctx context.Context, out io.Writer, onReady func(L)) error

// Lab is a lab running in the test's process.
type Lab[L any] struct {
	L   L      // what the lab handed over when it was ready
	Out *Lines // everything it printed, with times
	// Stop ends the lab and waits for run to return; a non-nil error from
	// run fails the test. Called again (or at cleanup) it does nothing.
	Stop func()
}

// StartLab runs a lab in-process and returns once it is ready. The lab is
// stopped when the test ends; its output is logged if the test failed or
// LABS_TEST_OUTPUT is set.
func StartLab[L any](t *testing.T, run RunFunc[L]) *Lab[L] {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &Lines{}
	ready := make(chan L, 1)
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, out, func(l L) { ready <- l }) }()
	lab := &Lab[L]{Out: out}
	var once sync.Once
	lab.Stop = func() {
		once.Do(func() {
			cancel()
			if err := <-errc; err != nil {
				t.Errorf("run: %v", err)
			}
		})
	}
	t.Cleanup(func() {
		lab.Stop()
		if t.Failed() || os.Getenv("LABS_TEST_OUTPUT") != "" {
			t.Logf("lab output:\n%s", out)
		}
	})
	select {
	case lab.L = <-ready:
		return lab
	case err := <-errc:
		errc <- err // for Stop
		t.Fatalf("run ended before it was ready: %v\n%s", err, out)
	case <-time.After(2 * time.Minute):
		t.Fatalf("not ready after 2m:\n%s", out)
	}
	return nil
}

// Lines records what a lab prints, each line with the time it was written,
// so a test can measure when the lab saw something (a PLEG event) without
// racing it.
type Lines struct {
	mu   sync.Mutex
	buf  strings.Builder
	seen []stampedLine
}

type stampedLine struct {
	at   time.Time
	line string
}

func (l *Lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for _, s := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		l.seen = append(l.seen, stampedLine{time.Now(), s})
	}
	return len(p), nil
}

func (l *Lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// First is when the first line written at or after since that contains
// every one of parts was written.
func (l *Lines) First(since time.Time, parts ...string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
next:
	for _, s := range l.seen {
		if s.at.Before(since) {
			continue
		}
		for _, p := range parts {
			if !strings.Contains(s.line, p) {
				continue next
			}
		}
		return s.at, true
	}
	return time.Time{}, false
}

// WaitLine waits until the lab has printed a line that contains every one
// of parts (what a learner looks for in the terminal), and returns when
// that line was written. The lab's whole output is logged when the test
// fails (StartLab), so the message names only the line.
func (l *Lines) WaitLine(tb testing.TB, timeout time.Duration, parts ...string) time.Time {
	tb.Helper()
	var at time.Time
	PollTrue(tb, fmt.Sprintf("a line with %q in the lab's output", parts), timeout, func() (ok bool) {
		at, ok = l.First(time.Time{}, parts...)
		return ok
	})
	return at
}

// NoLeaks checks, after every other cleanup of the test (cleanups run
// last registered first, so call it before starting anything), that no
// goroutine started during the test is left. The shared control plane is
// started first so its own goroutines are not counted, and client-go's
// idle connections (one per TLS config in a process-wide transport cache,
// idling until the server closes them) are not a lab's goroutines.
func NoLeaks(t *testing.T) {
	t.Helper()
	ControlPlane(t)
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		goleak.VerifyNone(t, ignore,
			goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
	})
}
