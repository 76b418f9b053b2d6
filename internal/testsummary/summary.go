package main

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"time"

	"kubelet-labs/internal/testevents"
)

type event = testevents.Event

type key struct{ pkg, test string }

// summary turns the event stream back into go test's usual, quiet output
// and remembers what to list at the end.
type summary struct {
	w       io.Writer
	pending map[key][]string // output of tests still running
	skipped []result
	failed  []result
	counts  struct{ pass, fail, skip, pkgOK, pkgFail int }
	tour    tour
}

type result struct {
	pkg, test, reason string
}

func newSummary(w io.Writer) *summary {
	return &summary{w: w, pending: map[key][]string{}}
}

// read consumes one go test -json stream.
func (s *summary) read(r io.Reader) {
	// a line that is not an event is passed through
	_ = testevents.Read(r, s.handle, func(line []byte) { fmt.Fprintln(s.w, string(line)) })
}

func (s *summary) handle(ev event) {
	k := key{ev.Package, ev.Test}
	s.tour.handle(ev)
	switch {
	case ev.Action == "build-output":
		fmt.Fprint(s.w, ev.Output)
	case ev.Test == "":
		s.packageEvent(ev)
	case ev.Action == "output":
		s.pending[k] = append(s.pending[k], ev.Output)
	case ev.Action == "pass":
		s.counts.pass++
		delete(s.pending, k)
	case ev.Action == "skip":
		s.counts.skip++
		s.skipped = append(s.skipped, result{ev.Package, ev.Test, skipReason(s.pending[k])})
		delete(s.pending, k)
	case ev.Action == "fail":
		s.counts.fail++
		s.failed = append(s.failed, result{pkg: ev.Package, test: ev.Test})
		s.printTest(k)
	}
}

func (s *summary) packageEvent(ev event) {
	switch ev.Action {
	case "output":
		// Verbose mode's bare PASS/FAIL lines are not printed by plain go test.
		if t := strings.TrimSpace(ev.Output); t == "PASS" || t == "FAIL" {
			return
		}
		fmt.Fprint(s.w, ev.Output)
	case "pass":
		s.counts.pkgOK++
	case "fail":
		s.counts.pkgFail++
		// A crash or timeout can end a package with tests that never
		// reported: their output is the clue.
		var left []key
		for k := range s.pending {
			if k.pkg == ev.Package {
				left = append(left, k)
			}
		}
		sort.Slice(left, func(i, j int) bool { return left[i].test < left[j].test })
		for _, k := range left {
			s.printTest(k)
		}
	}
}

// printTest prints a finished test's output as plain go test does: the
// "--- FAIL" line first, then what the test logged, without the ===
// progress lines of verbose mode.
func (s *summary) printTest(k key) {
	var head, body []string
	for _, line := range s.pending[k] {
		switch {
		case strings.HasPrefix(line, "=== "):
		case strings.HasPrefix(line, "--- "):
			head = append(head, line)
		default:
			body = append(body, line)
		}
	}
	for _, line := range append(head, body...) {
		fmt.Fprint(s.w, line)
	}
	delete(s.pending, k)
}

var location = regexp.MustCompile(`^\s+\S+\.go:\d+: `)

// skipReason is what t.Skip said: the last logged line before "--- SKIP".
func skipReason(lines []string) string {
	reason := ""
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") {
			continue
		}
		reason = strings.TrimSpace(location.ReplaceAllString(l, ""))
	}
	if reason == "" {
		return "(no reason given)"
	}
	return reason
}

func (s *summary) failedCount() int { return s.counts.fail + s.counts.pkgFail }

func (s *summary) print(took time.Duration) {
	s.tour.print(s.w)
	c := s.counts
	fmt.Fprintf(s.w, "\n== summary (%s): packages %d ok, %d failed; tests %d passed, %d failed, %d skipped\n",
		took.Round(time.Second), c.pkgOK, c.pkgFail, c.pass, c.fail, c.skip)
	if len(s.skipped) > 0 {
		fmt.Fprintf(s.w, "skipped:\n")
		for _, r := range s.skipped {
			fmt.Fprintf(s.w, "  %s %s: %s\n", r.pkg, r.test, r.reason)
		}
	}
	if len(s.failed) > 0 {
		fmt.Fprintf(s.w, "failed:\n")
		for _, r := range s.failed {
			fmt.Fprintf(s.w, "  %s %s\n", r.pkg, r.test)
		}
	}
}
