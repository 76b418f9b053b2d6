package labpod

import (
	"sync"
	"time"

	"kubelet-labs/internal/labenv"
)

// Timeline is a lab's *labenv.Printer with a stopwatch: between Start and
// Stop each line starts with the time since Start ("  +2.004s "), so a
// learner sees when each CRI call went out and came back — the lesson of
// labs 15 and 16. The lines themselves go through the Printer.
type Timeline struct {
	*labenv.Printer
	mu sync.Mutex
	t0 time.Time
}

// NewTimeline prints through p.
func NewTimeline(p *labenv.Printer) *Timeline { return &Timeline{Printer: p} }

// Printf prints one line, stamped while the stopwatch runs.
func (t *Timeline) Printf(format string, args ...any) {
	t.mu.Lock()
	t0 := t.t0
	t.mu.Unlock()
	if !t0.IsZero() {
		args = append([]any{time.Since(t0).Seconds()}, args...)
		format = "  %+7.3fs " + format
	}
	t.Printer.Printf(format, args...)
}

// Start stamps the lines that follow with the time since now.
func (t *Timeline) Start() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.t0 = time.Now()
}

// Stop ends the stamping and returns the time since Start.
func (t *Timeline) Stop() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := time.Since(t.t0)
	t.t0 = time.Time{}
	return d
}
