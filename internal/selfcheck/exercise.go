package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/testevents"
)

// exerciseTest is the name every lab's exercise test has.
const exerciseTest = "TestExercise"

// exerciseEnvVar turns the exercise tests on: exerciseEnvVar (not
// imported: a command has no business linking the testing package).
const exerciseEnvVar = "LABS_EXERCISE"

// exerciseCommand is the go test command that runs labs/<folder>'s
// exercise test, as the self-check and CI run it. -json, because the exit
// code cannot tell a test that passed from one that skipped (containerd
// not running, say): both exit 0, and only the events say which.
func exerciseCommand(ctx context.Context, root, folder string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-json", "-run", "^"+exerciseTest+"$", "./labs/"+folder)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), exerciseEnvVar+"=1")
	return cmd
}

// verdict is what an exercise test's run says about the exercise.
type verdict int

const (
	// notRun: no TestExercise result at all (the package did not build,
	// or has no such test); Lines say why.
	notRun verdict = iota
	// notSolved: TestExercise failed; Lines are its messages.
	notSolved
	// notChecked: TestExercise, or a part of it, skipped — something it
	// needs is missing, so it checked nothing (or not everything). Not
	// solved either: a skip is no pass.
	notChecked
	// solved: TestExercise passed, every part of it ran.
	solved
)

// exerciseResult is one package's exercise test, judged.
type exerciseResult struct {
	Verdict verdict
	// Skips: each test (TestExercise or a subtest) that skipped, with its
	// reason, "TestExercise/containerd: containerd is not available: …".
	Skips []string
	// Lines: what a learner needs when it is not solved — the test's own
	// messages, or the build's.
	Lines []string
}

// judgeExercises reads go test -json output, of one package or many, and
// judges each package's TestExercise; a package is there once an event
// named it.
func judgeExercises(out []byte) map[string]exerciseResult {
	type line struct{ test, text string }
	type pkgState struct {
		action   string   // TestExercise's pass, fail or skip
		skipped  []string // TestExercise or its subtests that skipped
		output   []line   // of TestExercise and its subtests, in order
		pkgLines []string // the build's and the package's own output
	}
	states := map[string]*pkgState{}
	_ = testevents.Read(bytes.NewReader(out), func(ev testevents.Event) {
		if f := strings.Fields(ev.ImportPath); ev.Package == "" && len(f) > 0 {
			ev.Package = f[0] // the build's output, before the package's events
		}
		if ev.Package == "" {
			return
		}
		s := states[ev.Package]
		if s == nil {
			s = &pkgState{}
			states[ev.Package] = s
		}
		ours := ev.Test == exerciseTest || strings.HasPrefix(ev.Test, exerciseTest+"/")
		switch {
		case ours && ev.Action == "output":
			s.output = append(s.output, line{ev.Test, ev.Output})
		case ours && ev.Action == "skip":
			s.skipped = append(s.skipped, ev.Test)
		}
		if ev.Test == exerciseTest && (ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip") {
			s.action = ev.Action
		}
		if ev.Test == "" && (ev.Action == "output" || ev.Action == "build-output") {
			s.pkgLines = append(s.pkgLines, ev.Output)
		}
	}, nil)

	results := map[string]exerciseResult{}
	for pkg, s := range states {
		var r exerciseResult
		for _, name := range s.skipped {
			var lines []string
			for _, l := range s.output {
				if l.test == name {
					lines = append(lines, l.text)
				}
			}
			r.Skips = append(r.Skips, name+": "+skipReason(lines))
		}
		switch {
		case s.action == "fail":
			// the failures; a skipped part is said apart, as not checked
			var lines []string
			for _, l := range s.output {
				if !slices.Contains(s.skipped, l.test) {
					lines = append(lines, l.text)
				}
			}
			r.Verdict, r.Lines = notSolved, failureLines(strings.Join(lines, ""))
		case s.action == "skip" || s.action == "pass" && len(s.skipped) > 0:
			r.Verdict = notChecked
		case s.action == "pass":
			r.Verdict = solved
		default:
			r.Verdict, r.Lines = notRun, failureLines(strings.Join(s.pkgLines, ""))
			if len(r.Lines) == 0 {
				r.Lines = []string{"go test ran no " + exerciseTest + " in " + pkg}
			}
		}
		results[pkg] = r
	}
	return results
}

// judgeExercise judges the exercise test of one lab from go test's
// output; stderr is what go printed outside the events (a package that
// does not exist, say).
func judgeExercise(stdout []byte, stderr, folder string) exerciseResult {
	results := judgeExercises(stdout)
	if r, ok := results[labsPackage+folder]; ok {
		return r
	}
	if len(results) == 1 { // a package go test named otherwise (./labs/…)
		for _, r := range results {
			return r
		}
	}
	r := exerciseResult{Verdict: notRun, Lines: failureLines(stderr)}
	if len(r.Lines) == 0 {
		r.Lines = []string{"go test said nothing about " + labsPackage + folder}
	}
	return r
}

// labsPackage is the import path of the labs' folder.
const labsPackage = "kubelet-labs/labs/"

// skipLocation is the file:line go test puts before a test's message.
var skipLocation = regexp.MustCompile(`^\s*[\w.-]+\.go:\d+: `)

// skipReason is a skipped test's own message, one line: its t.Skip text
// without the location, the "skipping: " the course's skips start with,
// or go test's RUN/SKIP lines.
func skipReason(output []string) string {
	var parts []string
	for _, l := range output {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		t = strings.TrimSpace(skipLocation.ReplaceAllString(l, ""))
		parts = append(parts, strings.TrimPrefix(t, "skipping: "))
	}
	if len(parts) == 0 {
		return "skipped, without a reason"
	}
	return strings.Join(parts, " ")
}

// runExercise runs the lab's exercise test and says solved, not checked
// (the test skipped: what it needs is missing) or not solved yet, with the
// test's own lines.
func runExercise(ctx context.Context, out *labenv.Printer, root, folder string) verdict {
	out.Printf("exercise: go test -run %s ./labs/%s (%s=1) …", exerciseTest, folder, exerciseEnvVar)
	var stdout, stderr bytes.Buffer
	cmd := exerciseCommand(ctx, root, folder)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run() // a failing test exits 1, a passing or skipped one 0: the events say which
	return reportExercise(out, judgeExercise(stdout.Bytes(), stderr.String(), folder), folder)
}

// reportExercise prints what the learner sees of a judged exercise test
// and returns its verdict.
func reportExercise(out *labenv.Printer, r exerciseResult, folder string) verdict {
	switch r.Verdict {
	case solved:
		out.Printf("exercise: solved.")
		return solved
	case notChecked:
		for _, s := range r.Skips {
			out.Printf("exercise: not checked: %s", s)
		}
		out.Printf("The test skipped, so it proved nothing: do what it says, then run make check again.")
		return notChecked
	case notSolved:
		out.Printf("exercise: not solved yet. The test says:")
	default:
		out.Printf("exercise: the test did not run:")
	}
	for _, line := range r.Lines {
		out.Printf("  %s", line)
	}
	for _, s := range r.Skips {
		out.Printf("exercise: not checked: %s", s)
	}
	out.Printf("Hints are in the README's Exercise section; the solution is solutions/%s.patch.", folder)
	return r.Verdict
}

// failureLines keeps what a learner needs from go test's output: the
// test's own messages, not the RUN/FAIL/ok lines around them.
func failureLines(out string) []string {
	var keep []string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		t := strings.TrimSpace(line)
		if t == "" || t == "FAIL" || t == "PASS" || strings.HasPrefix(t, "FAIL\t") || strings.HasPrefix(t, "ok  \t") ||
			strings.HasPrefix(t, "exit status") || strings.HasPrefix(t, "=== ") {
			continue
		}
		keep = append(keep, line)
	}
	if len(keep) > 40 {
		keep = append(keep[:40], "…")
	}
	return keep
}
