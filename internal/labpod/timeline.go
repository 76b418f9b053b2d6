package labpod

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Timeline prints lines from several goroutines one at a time; between
// Start and Stop each line is stamped with the time since Start, so a
// learner sees when each CRI call went out and came back.
type Timeline struct {
	mu sync.Mutex
	w  io.Writer
	t0 time.Time
}

// NewTimeline prints to w.
func NewTimeline(w io.Writer) *Timeline { return &Timeline{w: w} }

// Printf prints one line.
func (t *Timeline) Printf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.t0.IsZero() {
		fmt.Fprintf(t.w, "  %+7.3fs ", time.Since(t.t0).Seconds())
	}
	fmt.Fprintf(t.w, format+"\n", args...)
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
