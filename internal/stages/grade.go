package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"kubelet-labs/internal/testevents"
)

// result is what one run of a stage's grader found.
type result struct {
	// Passed and Failed are the tests that ran, leaf subtests only when
	// a test has them (a half-right answer passes some of them).
	Passed, Failed []string
	// Messages holds each failed test's own lines (t.Errorf's).
	Messages map[string][]string
	// BuildErrors is what go printed when the package did not compile
	// (with the learner's file named as the learner knows it).
	BuildErrors []string
}

// ok: the grader ran something and all of it passed.
func (r result) ok() bool {
	return len(r.BuildErrors) == 0 && len(r.Failed) == 0 && len(r.Passed) > 0
}

// runGrader runs the stage's tests in root, with the file at yours in
// place of the stage file when yours is not empty (an overlay written
// into dir).
func runGrader(ctx context.Context, root, dir string, s Stage, yours string) (result, error) {
	args := []string{"test", "-count=1", "-json", "-run", s.Tests}
	if yours != "" {
		overlay, err := writeOverlay(root, dir, s, yours)
		if err != nil {
			return result{}, err
		}
		args = append(args, "-overlay", overlay)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, s.Package)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "LABS_EXERCISE=") // the labs' exercise tests stay skipped
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, _ := cmd.Output() // a failing test exits 1: the events say which
	r := parseEvents(out)
	rename := func(line string) string {
		if yours == "" {
			return line
		}
		// go names the replaced file by its own path; the learner knows it as theirs
		line = strings.ReplaceAll(line, filepath.Join(root, s.File), yours)
		return strings.ReplaceAll(line, s.File, yours)
	}
	for i, l := range r.BuildErrors {
		r.BuildErrors[i] = rename(l)
	}
	for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "FAIL") {
			r.BuildErrors = append(r.BuildErrors, rename(l))
		}
	}
	return r, ctx.Err()
}

// writeOverlay writes the go build overlay that puts yours in place of
// the stage file, and returns its path.
func writeOverlay(root, dir string, s Stage, yours string) (string, error) {
	data, err := json.Marshal(map[string]map[string]string{
		"Replace": {filepath.Join(root, s.File): yours},
	})
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "overlay.json")
	return path, os.WriteFile(path, append(data, '\n'), 0o600)
}

// parseEvents reads go test -json: which leaf tests passed and failed,
// the failed ones' messages, and build errors.
func parseEvents(out []byte) result {
	r := result{Messages: map[string][]string{}}
	outputs := map[string][]string{}
	status := map[string]string{}
	_ = testevents.Read(bytes.NewReader(out), func(ev testevents.Event) {
		switch {
		case ev.Action == "build-output":
			if l := strings.TrimRight(ev.Output, "\n"); l != "" && !strings.HasPrefix(l, "# ") {
				r.BuildErrors = append(r.BuildErrors, l)
			}
		case ev.Test == "":
		case ev.Action == "output":
			outputs[ev.Test] = append(outputs[ev.Test], strings.TrimRight(ev.Output, "\n"))
		case ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip":
			status[ev.Test] = ev.Action
		}
	}, nil)
	var tests []string
	for t := range status {
		tests = append(tests, t)
	}
	sort.Strings(tests)
	for _, t := range tests {
		if hasSubtests(t, status) {
			// a parent that failed only through its subtests says nothing
			// of its own; if it failed on its own, keep its lines
			if status[t] == "fail" && !anyFailed(t, status) {
				r.Failed = append(r.Failed, t)
				r.Messages[t] = ownLines(outputs[t])
			}
			continue
		}
		switch status[t] {
		case "pass":
			r.Passed = append(r.Passed, t)
		case "fail":
			r.Failed = append(r.Failed, t)
			r.Messages[t] = ownLines(outputs[t])
		}
	}
	return r
}

func hasSubtests(t string, status map[string]string) bool {
	for other := range status {
		if strings.HasPrefix(other, t+"/") {
			return true
		}
	}
	return false
}

func anyFailed(t string, status map[string]string) bool {
	for other, s := range status {
		if strings.HasPrefix(other, t+"/") && s == "fail" {
			return true
		}
	}
	return false
}

// ownLines keeps a test's own messages: not go test's === RUN and
// --- FAIL lines.
func ownLines(lines []string) []string {
	var keep []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") {
			continue
		}
		keep = append(keep, t)
	}
	return keep
}
