package labenv

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Printer writes whole lines from many goroutines (a lab's heartbeats,
// pod workers, PLEG and status manager all print) without interleaving
// them.
type Printer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewPrinter prints to w.
func NewPrinter(w io.Writer) *Printer { return &Printer{w: w} }

// Printf writes one line.
func (p *Printer) Printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format+"\n", args...)
}

// Write writes p as it is, under the same lock: a Printer is the io.Writer
// a lab hands to code that prints (klog, a tabwriter, a child's output),
// so its lines do not cut through the lab's own.
func (p *Printer) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.w.Write(b)
}

// Stamped writes one line that starts with the wall clock to the
// millisecond, so a learner can read how long each step took.
func (p *Printer) Stamped(format string, args ...any) {
	p.Printf(time.Now().Format("15:04:05.000")+" "+format, args...)
}

// Indented returns a Printf that indents each line by two spaces: the
// steps of a step (the join's own lines under "joining …").
func (p *Printer) Indented() func(format string, args ...any) {
	return func(format string, args ...any) { p.Printf("  "+format, args...) }
}
