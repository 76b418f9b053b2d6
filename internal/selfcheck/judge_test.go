package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kubelet-labs/internal/labenv"
)

// TestJudgeExercise: make check LAB=NN EXERCISE=1 says solved only when
// TestExercise passed with every part of it run. A test that skipped —
// containerd not running, the usual case — checked nothing and is "not
// checked" with its own reason, not solved (go test exits 0 for a skip as
// for a pass, which is what the exit code alone took for solved). The
// outputs in testdata/exercise are go test -json's, recorded on this
// machine: lab 11 and lab 15 without containerd, lab 15 with its parts
// passing, a lab that does not build.
func TestJudgeExercise(t *testing.T) {
	const containerdMissing = "containerd is not available: containerd is not reachable at /var/lib/kubelet-labs/containerd/2.2/containerd.sock: " +
		"the socket does not exist; start it with: sudo scripts/containerd-up.sh (stat /var/lib/kubelet-labs/containerd/2.2/containerd.sock: no such file or directory)"
	for _, c := range []struct {
		file, folder string
		want         verdict
		skips        []string
		lines        []string // some of the lines shown, in order
		notLines     []string // never shown
		says         []string // what the learner reads, in order
		exitErr      string   // outcome's error with every check done
	}{
		{
			file: "containerd-missing.jsonl", folder: "11-containerd", want: notChecked,
			skips:   []string{"TestExercise: " + containerdMissing},
			says:    []string{"exercise: not checked: TestExercise: containerd is not available", "sudo scripts/containerd-up.sh", "The test skipped, so it proved nothing"},
			exitErr: "lab 11: the exercise was not checked (its test skipped)",
		},
		{
			file: "pass-but-part-skipped.jsonl", folder: "15-stop-escalation", want: notChecked,
			skips:   []string{"TestExercise/containerd: " + containerdMissing},
			says:    []string{"exercise: not checked: TestExercise/containerd: containerd is not available"},
			exitErr: "lab 15: the exercise was not checked (its test skipped)",
		},
		{
			file: "fail-and-part-skipped.jsonl", folder: "15-stop-escalation", want: notSolved,
			skips: []string{"TestExercise/containerd: " + containerdMissing},
			lines: []string{"exercise_test.go:61: on fakecri, polite running sleep 3600: you predicted exit code 0", "--- FAIL: TestExercise/fakecri", "--- FAIL: TestExercise ("},
			// the skip is said as not checked, not among the failures;
			// and none of go test's own RUN/FAIL trailer lines
			notLines: []string{"skipping: containerd", "=== RUN", "FAIL\tkubelet-labs"},
			says:     []string{"exercise: not solved yet. The test says:", "you predicted exit code 0", "exercise: not checked: TestExercise/containerd", "solutions/15-stop-escalation.patch"},
			exitErr:  "lab 15: the exercise is not solved yet",
		},
		{
			file: "solved.jsonl", folder: "15-stop-escalation", want: solved,
			says: []string{"exercise: solved."},
		},
		{
			file: "build-failed.jsonl", folder: "07-pleg", want: notRun,
			lines:    []string{"# kubelet-labs/labs/07-pleg", "exercise_test.go:41:2: syntax error"},
			notLines: []string{"[build failed]"},
			says:     []string{"exercise: the test did not run:", "syntax error", "solutions/07-pleg.patch"},
			exitErr:  "lab 07: the exercise is not solved yet",
		},
	} {
		t.Run(c.file, func(t *testing.T) {
			out, err := os.ReadFile(filepath.Join("testdata", "exercise", c.file))
			if err != nil {
				t.Fatal(err)
			}
			r := judgeExercise(out, "", c.folder)
			if r.Verdict != c.want {
				t.Errorf("verdict %d, want %d: %+v", r.Verdict, c.want, r)
			}
			if strings.Join(r.Skips, "\n") != strings.Join(c.skips, "\n") {
				t.Errorf("skips:\n%q\nwant\n%q", r.Skips, c.skips)
			}
			shown := strings.Join(r.Lines, "\n")
			assertInOrder(t, "lines", shown, c.lines)
			for _, s := range c.notLines {
				if strings.Contains(shown, s) {
					t.Errorf("lines show %q:\n%s", s, shown)
				}
			}

			var buf bytes.Buffer
			if got := reportExercise(labenv.NewPrinter(&buf), r, c.folder); got != c.want {
				t.Errorf("reportExercise returned %d, want %d", got, c.want)
			}
			assertInOrder(t, "the learner reads", buf.String(), c.says)
			if c.want != solved && strings.Contains(buf.String(), "solved.") {
				t.Errorf("says solved:\n%s", buf.String())
			}

			err = outcome(c.folder[:2], 0, 3, r.Verdict)
			if got := errString(err); got != c.exitErr {
				t.Errorf("outcome: %q, want %q", got, c.exitErr)
			}
		})
	}
}

// TestJudgeExerciseWithoutEvents: go test that printed no event for the
// lab (a folder that is not a package) is "did not run", with what go
// printed on stderr.
func TestJudgeExerciseWithoutEvents(t *testing.T) {
	r := judgeExercise(nil, "go: cannot find main module\n", "07-pleg")
	if r.Verdict != notRun || strings.Join(r.Lines, "\n") != "go: cannot find main module" {
		t.Errorf("%+v", r)
	}
	r = judgeExercise([]byte(`{"Action":"start","Package":"kubelet-labs/labs/07-pleg"}
{"Action":"output","Package":"kubelet-labs/labs/07-pleg","Output":"testing: warning: no tests to run\n"}
{"Action":"pass","Package":"kubelet-labs/labs/07-pleg"}
`), "", "07-pleg")
	if r.Verdict != notRun || !strings.Contains(strings.Join(r.Lines, "\n"), "no tests to run") {
		t.Errorf("a package without TestExercise: %+v", r)
	}
}

// TestOutcome: what is missing, in one line, and nil only when all is done.
func TestOutcome(t *testing.T) {
	for _, c := range []struct {
		notDone int
		ex      verdict
		want    string
	}{
		{0, solved, ""},
		{2, solved, "lab 07: 2 of 5 not done yet"},
		{2, notChecked, "lab 07: 2 of 5 not done yet, and the exercise was not checked (its test skipped)"},
		{0, notSolved, "lab 07: the exercise is not solved yet"},
		{1, notRun, "lab 07: 1 of 5 not done yet, and the exercise is not solved yet"},
	} {
		if got := errString(outcome("07", c.notDone, 5, c.ex)); got != c.want {
			t.Errorf("outcome(%d not done, verdict %d) = %q, want %q", c.notDone, c.ex, got, c.want)
		}
	}
}

// TestParseLab: make check LAB=7 is lab 07, as LAB=07, LAB=07-pleg and
// the folder a shell completes are; anything else is a one-line error
// that says what to write, and the command exits 2 before it runs.
func TestParseLab(t *testing.T) {
	for _, c := range []struct{ arg, lab, folder string }{
		{"7", "07", ""},
		{"07", "07", ""},
		{"0", "00", ""},
		{"18", "18", ""},
		{" 9 ", "09", ""},
		{"07-pleg", "07", "07-pleg"},
		{"labs/07-pleg/", "07", "07-pleg"},
		{"./labs/12-pleg-containerd", "12", "12-pleg-containerd"},
	} {
		lab, folder, err := parseLab(c.arg)
		if err != nil || lab != c.lab || folder != c.folder {
			t.Errorf("parseLab(%q) = %q, %q, %v; want %q, %q", c.arg, lab, folder, err, c.lab, c.folder)
		}
	}
	for _, c := range []struct{ arg, want string }{
		{"", "no lab given: say which, e.g. make check LAB=07"},
		{"007", `--lab "007": want a lab's number or folder, e.g. make check LAB=7, LAB=07 or LAB=07-pleg`},
		{"seven", `--lab "seven": want a lab's number or folder`},
		{"-1", `--lab "-1": want a lab's number or folder`},
		{"7.", `--lab "7.": want a lab's number or folder`},
		{"19", "--lab 19: no such lab (labs: 00 01"},
		{"99-x", "--lab 99-x: no such lab"},
	} {
		_, _, err := parseLab(c.arg)
		if got := errString(err); !strings.HasPrefix(got, c.want) || strings.Contains(got, "\n") {
			t.Errorf("parseLab(%q): %q, want one line starting %q", c.arg, got, c.want)
		}
	}

	// As a learner runs it: one line on stderr, exit 2, nothing run.
	for _, arg := range []string{"", "seven", "19"} {
		var stdout, stderr bytes.Buffer
		code := labenv.Exec(command(), []string{"--lab", arg}, &stdout, &stderr)
		if code != 2 || stdout.Len() != 0 || strings.Count(stderr.String(), "\n") != 1 || !strings.HasPrefix(stderr.String(), "error: ") {
			t.Errorf("--lab %q: exit %d, stdout %q, stderr %q; want exit 2 and one error line", arg, code, stdout.String(), stderr.String())
		}
	}
	var stderr bytes.Buffer
	fs := flag.NewFlagSet("selfcheck", flag.ContinueOnError)
	command().Flags(fs)
	fs.SetOutput(&stderr)
	fs.PrintDefaults()
	if !strings.Contains(stderr.String(), "(7 or 07)") {
		t.Errorf("the --lab flag's help does not say a one-digit number works:\n%s", stderr.String())
	}
}

// assertInOrder: each of want is in s, after the one before.
func assertInOrder(t *testing.T, what, s string, want []string) {
	t.Helper()
	rest := s
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Errorf("%s: no %q (in this order) in:\n%s", what, w, s)
			return
		}
		rest = rest[i+len(w):]
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
