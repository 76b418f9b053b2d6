// Package report reads ginkgo's JSON report of a conformance run and says
// what a person wants first: how many specs passed, failed and were
// skipped, and for each failure its name and the first line of its
// failure message (the cause, most of the time: "timed out waiting for
// the condition", "expected ... to contain ..."). A run of several ginkgo
// invocations (the parallel and the serial part of `make conformance
// SUITE=certified`) merges their reports into one Summary, whose failures
// it groups as BASELINE.md does: by SIG (the spec's [sig-xxx] tag) and by a
// keyword of the cause, in summary.txt and in a Markdown fragment.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2/types"
)

// Spec is one spec that ran (or was skipped while running).
type Spec struct {
	Name  string
	State string // passed, failed, skipped, timedout, panicked, interrupted, aborted
	// Cause is the failure (or skip) message's first line.
	Cause   string
	RunTime time.Duration
	// Part is the ginkgo run the spec was in ("parallel", "serial"; empty
	// for a run of one part).
	Part string
}

// Failed says whether the spec counts as a failure.
func (s Spec) Failed() bool { return s.State != "passed" && s.State != "skipped" }

// Summary is a run's result.
type Summary struct {
	Passed, Failed, Skipped int
	// Specs are the specs of the selection, failures first, then by name.
	Specs []Spec
	// RunTime is the suite's wall time (the sum of the parts').
	RunTime time.Duration
	// Parts are the ginkgo runs merged into the summary, in their order
	// (none when it is one run's report, as Read returns it).
	Parts []Part
}

// Part is one ginkgo run of a merged summary.
type Part struct {
	Name string
	// Procs is the run's ginkgo processes.
	Procs                   int
	Passed, Failed, Skipped int
	RunTime                 time.Duration
}

// Total is the number of specs of the selection.
func (s Summary) Total() int { return s.Passed + s.Failed + s.Skipped }

// Add merges t, the report of the ginkgo run named name with procs
// processes, into s: the counts add up, the specs keep their order
// (failures first, then by name) and say which part they were in.
func (s *Summary) Add(name string, procs int, t Summary) {
	s.Passed += t.Passed
	s.Failed += t.Failed
	s.Skipped += t.Skipped
	s.RunTime += t.RunTime
	s.Parts = append(s.Parts, Part{Name: name, Procs: procs, Passed: t.Passed, Failed: t.Failed, Skipped: t.Skipped, RunTime: t.RunTime})
	for _, sp := range t.Specs {
		sp.Part = name
		s.Specs = append(s.Specs, sp)
	}
	sortSpecs(s.Specs)
}

// Read reads a report ginkgo wrote with --json-report.
func Read(path string) (Summary, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Summary{}, err
	}
	var reports []types.Report
	if err := json.Unmarshal(data, &reports); err != nil {
		return Summary{}, fmt.Errorf("%s: %w", path, err)
	}
	var s Summary
	for _, r := range reports {
		if r.RunTime > s.RunTime {
			s.RunTime = r.RunTime
		}
		for _, sr := range r.SpecReports {
			if sr.LeafNodeType != types.NodeTypeIt {
				continue // suite set-up nodes (BeforeSuite...): their failures show in every spec
			}
			sp := Spec{Name: sr.FullText(), State: sr.State.String(), RunTime: sr.RunTime}
			if sr.State == types.SpecStateSkipped && sr.Failure.Message == "" {
				continue // filtered out by --focus/--skip: not part of the selection
			}
			sp.Cause = firstLine(sr.Failure.Message)
			switch {
			case sr.State == types.SpecStatePassed:
				s.Passed++
			case sr.State == types.SpecStateSkipped:
				s.Skipped++
			default:
				s.Failed++
			}
			s.Specs = append(s.Specs, sp)
		}
	}
	sortSpecs(s.Specs)
	return s, nil
}

// sortSpecs puts failures first, then orders by name.
func sortSpecs(specs []Spec) {
	sort.SliceStable(specs, func(i, j int) bool {
		a, b := specs[i], specs[j]
		if a.Failed() != b.Failed() {
			return a.Failed()
		}
		return a.Name < b.Name
	})
}

func firstLine(msg string) string {
	msg = strings.TrimSpace(msg)
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	const max = 300
	if len(msg) > max {
		msg = msg[:max] + "…"
	}
	return msg
}

// sigTag is the e2e framework's SIG tag: framework.SIGDescribe("node")
// labels its specs sig-node (test/e2e/framework/ginkgowrapper.go:130-139
// at v1.36.3) and every label also goes into the text as "[sig-node]"
// (ginkgowrapper.go:271-274).
var sigTag = regexp.MustCompile(`\[(sig-[a-z0-9-]+)\]`)

// NoSIG is the SIG of a spec without a [sig-xxx] tag.
const NoSIG = "no SIG"

// SIG is the spec's first [sig-xxx] tag without its brackets ("sig-node"),
// or NoSIG.
func (s Spec) SIG() string {
	if m := sigTag.FindStringSubmatch(s.Name); m != nil {
		return m[1]
	}
	return NoSIG
}

// The cause keywords, from what e2e failures say most often.
const (
	CausePanicked   = "panicked"     // the spec panicked: a nil the node left (e.g. no resize status)
	CauseSpecTimout = "spec timeout" // ginkgo's --timeout or the spec's own deadline
	CauseTimedOut   = "timed out"    // a wait gave up: the node never did it
	CausePodFailed  = "pod failed"   // "expected pod ... success: Told to stop trying": it ended Failed
	CauseOutput     = "wrong output" // "expected ... in container output"
	CauseExec       = "exec failed"  // a command run in the container exited non-zero
	CauseAssertion  = "assertion"    // a gomega Expect that did not hold
	CauseOther      = "other"        // the rest: read the cause line
	causeStopped    = "stopped"      // interrupted or aborted: the run, not the spec
)

// CauseKeyword sorts a failure by its state and the first line of its
// message into one of the Cause* keywords ("" for a spec that did not fail).
// A keyword, not a diagnosis: check the cause line before acting on it.
func (s Spec) CauseKeyword() string {
	if !s.Failed() {
		return ""
	}
	msg := s.Cause
	switch {
	case s.State == "panicked" || strings.Contains(msg, "Test Panicked"):
		return CausePanicked
	case s.State == "interrupted" || s.State == "aborted":
		return causeStopped
	case s.State == "timedout":
		return CauseSpecTimout
	case strings.HasPrefix(msg, "expected pod") && strings.Contains(msg, "Told to stop trying"):
		return CausePodFailed
	case strings.Contains(msg, "Timed out after"), strings.Contains(msg, "timed out waiting"),
		strings.Contains(msg, "context deadline exceeded"):
		return CauseTimedOut
	case strings.Contains(msg, "in container output"):
		return CauseOutput
	case strings.Contains(msg, "command terminated with exit code"):
		return CauseExec
	case strings.HasPrefix(msg, "Expected"):
		return CauseAssertion
	}
	return CauseOther
}

// Count is a group's tally.
type Count struct {
	Key                     string
	Passed, Failed, Skipped int
}

// Total is the group's number of specs.
func (c Count) Total() int { return c.Passed + c.Failed + c.Skipped }

// BySIG tallies the specs per SIG, the largest SIG first.
func (s Summary) BySIG() []Count {
	return tally(s.Specs, func(sp Spec) string { return sp.SIG() })
}

// ByCause tallies the failures per cause keyword, the most frequent first.
func (s Summary) ByCause() []Count {
	var failed []Spec
	for _, sp := range s.Specs {
		if sp.Failed() {
			failed = append(failed, sp)
		}
	}
	return tally(failed, func(sp Spec) string { return sp.CauseKeyword() })
}

func tally(specs []Spec, key func(Spec) string) []Count {
	idx := map[string]int{}
	var out []Count
	for _, sp := range specs {
		k := key(sp)
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, Count{Key: k})
		}
		switch {
		case sp.State == "passed":
			out[i].Passed++
		case sp.State == "skipped":
			out[i].Skipped++
		default:
			out[i].Failed++
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Total() != out[j].Total() {
			return out[i].Total() > out[j].Total()
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// Print writes "N passed, M failed, K skipped", the parts, the tallies by
// SIG and by cause, and one line per failure.
func (s Summary) Print(w io.Writer) {
	fmt.Fprintf(w, "%d passed, %d failed, %d skipped (%s)\n", s.Passed, s.Failed, s.Skipped, s.RunTime.Round(time.Second))
	if len(s.Parts) > 1 {
		fmt.Fprintf(w, "%s\n", s.partsLine())
	}
	if len(s.Parts) > 1 || s.Failed > 0 {
		fmt.Fprintf(w, "by SIG (passed/specs): %s\n", joinCounts(s.BySIG(), func(c Count) string { return fmt.Sprintf("%s %d/%d", c.Key, c.Passed, c.Total()) }))
	}
	if s.Failed > 0 {
		fmt.Fprintf(w, "failures by cause: %s\n", joinCounts(s.ByCause(), func(c Count) string { return fmt.Sprintf("%s %d", c.Key, c.Failed) }))
	}
	for _, sp := range s.Specs {
		if sp.Failed() {
			fmt.Fprintf(w, "FAIL  %s\n      %s%s: %s\n", sp.Name, sp.State, s.partNote(sp), sp.Cause)
		}
	}
}

// PrintSelection writes what a dry run selected: the number of specs, per
// part and per SIG.
func (s Summary) PrintSelection(w io.Writer) {
	fmt.Fprintf(w, "%d specs selected\n", s.Total())
	if len(s.Parts) > 1 {
		var parts []string
		for _, p := range s.Parts {
			parts = append(parts, fmt.Sprintf("%s run %d", p.Name, p.Passed+p.Failed+p.Skipped))
		}
		fmt.Fprintf(w, "  %s\n", strings.Join(parts, ", "))
	}
	for _, c := range s.BySIG() {
		fmt.Fprintf(w, "  %-22s %4d\n", c.Key, c.Total())
	}
}

// partsLine is "parallel: 417 specs, 12 processes, 50m0s; serial: ...".
func (s Summary) partsLine() string {
	var parts []string
	for _, p := range s.Parts {
		procs := "processes"
		if p.Procs == 1 {
			procs = "process"
		}
		parts = append(parts, fmt.Sprintf("%s: %d specs, %d %s, %s", p.Name, p.Passed+p.Failed+p.Skipped, p.Procs, procs, p.RunTime.Round(time.Second)))
	}
	return strings.Join(parts, "; ")
}

// partNote is " (serial run)" when the summary merges several runs.
func (s Summary) partNote(sp Spec) string {
	if len(s.Parts) > 1 && sp.Part != "" {
		return " (" + sp.Part + " run)"
	}
	return ""
}

func joinCounts(cs []Count, f func(Count) string) string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = f(c)
	}
	return strings.Join(out, ", ")
}

// Markdown writes the summary as BASELINE.md keeps a run: the counts, a
// table by SIG, the failures by cause, then a section per SIG and cause
// keyword with a line per failure ("- `name` — state: cause"), ready to
// paste under a "## Run ..." heading.
func (s Summary) Markdown(w io.Writer) {
	fmt.Fprintf(w, "%d passed, %d failed, %d skipped of %d (ginkgo %s", s.Passed, s.Failed, s.Skipped, s.Total(), s.RunTime.Round(time.Second))
	if len(s.Parts) > 1 {
		fmt.Fprintf(w, "; %s", s.partsLine())
	}
	fmt.Fprintf(w, ")\n\n| SIG | specs | passed | failed | skipped |\n|---|--:|--:|--:|--:|\n")
	for _, c := range s.BySIG() {
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d |\n", c.Key, c.Total(), c.Passed, c.Failed, c.Skipped)
	}
	if s.Failed == 0 {
		return
	}
	fmt.Fprintf(w, "\nFailures by cause (a keyword of the message; check the cause line before acting on one): %s\n",
		joinCounts(s.ByCause(), func(c Count) string { return fmt.Sprintf("%s %d", c.Key, c.Failed) }))
	type group struct {
		sig, cause string
		specs      []Spec
	}
	var groups []*group
	idx := map[[2]string]*group{}
	for _, sp := range s.Specs {
		if !sp.Failed() {
			continue
		}
		k := [2]string{sp.SIG(), sp.CauseKeyword()}
		g, ok := idx[k]
		if !ok {
			g = &group{sig: k[0], cause: k[1]}
			idx[k] = g
			groups = append(groups, g)
		}
		g.specs = append(g.specs, sp)
	}
	sort.SliceStable(groups, func(i, j int) bool {
		if groups[i].sig != groups[j].sig {
			return groups[i].sig < groups[j].sig
		}
		if len(groups[i].specs) != len(groups[j].specs) {
			return len(groups[i].specs) > len(groups[j].specs)
		}
		return groups[i].cause < groups[j].cause
	})
	for _, g := range groups {
		fmt.Fprintf(w, "\n### %s: %s (%d)\n\n", g.sig, g.cause, len(g.specs))
		for _, sp := range g.specs {
			fmt.Fprintf(w, "- `%s` — %s%s: %s\n", sp.Name, sp.State, s.partNote(sp), sp.Cause)
		}
	}
}
