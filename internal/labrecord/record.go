// Package labrecord keeps, in a lab's state folder, a plain-text record of
// what a run saw — for the self-check (make check LAB=NN, internal/selfcheck)
// where the run itself leaves nothing to look at: lab 06's walk-through ends
// with crictl rm, lab 09's pods are deleted, lab 10's workers live only in
// its process, labs 15 and 16 remove everything they made. One line per
// thing seen, written as it happens; the file is the learner's (0600).
package labrecord

import (
	"fmt"
	"os"
	"strings"
	"sync"
)

// Record is an open record file. Line may be called from many goroutines.
type Record struct {
	mu  sync.Mutex
	f   *os.File
	err error // the first failed write: later lines are dropped
}

// Create starts the record of a run at path, replacing the last run's.
func Create(path string) (*Record, error) {
	return open(path, os.O_TRUNC)
}

// Append adds this run's lines at the end of path, after earlier runs'.
func Append(path string) (*Record, error) {
	return open(path, os.O_APPEND)
}

func open(path string, mode int) (*Record, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|mode, 0o600)
	if err != nil {
		return nil, fmt.Errorf("the record for make check: %w", err)
	}
	return &Record{f: f}, nil
}

// Line writes one line. A failed write does not stop the lab — the record
// is for the self-check, not for the run — and Err says it happened.
func (r *Record) Line(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return
	}
	if _, err := fmt.Fprintf(r.f, strings.TrimSuffix(format, "\n")+"\n", args...); err != nil {
		r.err = fmt.Errorf("the record %s: %w (make check will not see this run)", r.f.Name(), err)
	}
}

// Err is the first write that failed, if any.
func (r *Record) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Close closes the file.
func (r *Record) Close() error { return r.f.Close() }

// Write writes a whole record (text, its lines) at path at once,
// replacing the last run's: for a lab that knows what it saw only at the
// end of its run.
func Write(path, text string) error {
	return os.WriteFile(path, []byte(text), 0o600)
}
