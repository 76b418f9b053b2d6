// Package report reads ginkgo's JSON report of a conformance run and says
// what a person wants first: how many specs passed, failed and were
// skipped, and for each failure its name and the first line of its
// failure message (the cause, most of the time: "timed out waiting for
// the condition", "expected ... to contain ...").
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
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
}

// Failed says whether the spec counts as a failure.
func (s Spec) Failed() bool { return s.State != "passed" && s.State != "skipped" }

// Summary is a run's result.
type Summary struct {
	Passed, Failed, Skipped int
	// Specs are the specs of the selection, failures first, then by name.
	Specs []Spec
	// RunTime is the suite's wall time.
	RunTime time.Duration
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
	sort.Slice(s.Specs, func(i, j int) bool {
		a, b := s.Specs[i], s.Specs[j]
		if a.Failed() != b.Failed() {
			return a.Failed()
		}
		return a.Name < b.Name
	})
	return s, nil
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

// Print writes "N passed, M failed, K skipped" and one line per failure.
func (s Summary) Print(w io.Writer) {
	fmt.Fprintf(w, "%d passed, %d failed, %d skipped (%s)\n", s.Passed, s.Failed, s.Skipped, s.RunTime.Round(time.Second))
	for _, sp := range s.Specs {
		if sp.Failed() {
			fmt.Fprintf(w, "FAIL  %s\n      %s: %s\n", sp.Name, sp.State, sp.Cause)
		}
	}
}
