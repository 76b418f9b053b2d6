package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/state"
)

func main() {
	var o options
	labenv.Main(labenv.Lab{
		Name:    "stages",
		Command: "make stage [NAME=…] | make grade NAME=…  (go run ./internal/stages [--start NAME [--reset] | --grade NAME | --verify NAME|all])",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.start, "start", "", "open the stage NAME: write your copy of its file, the functions to write emptied")
			fs.BoolVar(&o.reset, "reset", false, "with --start: start over (your file is kept as FILE.orig)")
			fs.Func("grade", "judge your copy of the stage NAME with its tests", func(v string) error {
				o.grade, o.gradeAsked = v, true
				return nil
			})
			fs.StringVar(&o.verify, "verify", "", "for the course: the grader of stage NAME (or all) fails on the stub and passes on the reference")
		},
		Check: o.check,
		Run: func(ctx context.Context, out *labenv.Printer) error {
			root, err := state.Root()
			if err != nil {
				return err
			}
			stages, err := loadCatalog()
			if err != nil {
				return err
			}
			switch {
			case o.start != "":
				return runStart(ctx, out, root, stages, o.start, o.reset)
			case o.grade != "":
				return runGrade(ctx, out, root, stages, o.grade)
			case o.verify != "":
				return runVerify(ctx, out, root, stages, o.verify)
			}
			return list(out, stages)
		},
	})
}

type options struct {
	start, grade, verify string
	reset, gradeAsked    bool
}

func (o *options) check() error {
	n := 0
	for _, v := range []string{o.start, o.grade, o.verify} {
		if v != "" {
			n++
		}
	}
	switch {
	case n > 1:
		return fmt.Errorf("--start, --grade and --verify: one at a time")
	case o.gradeAsked && o.grade == "":
		return fmt.Errorf("which stage? make grade NAME=… (make stage lists them)")
	case o.reset && o.start == "":
		return fmt.Errorf("--reset goes with --start NAME (make stage NAME=… RESET=1)")
	}
	for _, v := range []string{o.start, o.grade} {
		if v != "" && !stageName.MatchString(v) {
			return fmt.Errorf("stage %q: want a stage's name, e.g. make stage NAME=pleg-relist (make stage lists them)", v)
		}
	}
	return nil
}

// list prints every stage with the learner's progress.
func list(out *labenv.Printer, stages []Stage) error {
	out.Printf("Build it yourself: the kubelet's key functions, written by you and judged by tests (docs/build-it.md).")
	out.Printf("  %-4s %-24s %-12s %s", "lab", "stage", "yours", "what you write")
	for _, s := range stages {
		w, err := workCopyOf(s)
		if err != nil {
			return err
		}
		status := "-"
		switch {
		case w.passed():
			status = "passed"
		case w.open():
			status = "open"
		}
		out.Printf("  %-4.2s %-24s %-12s %s", s.Lab, s.Name, status, s.Title)
	}
	out.Printf("Open one: make stage NAME=%s · judge it: make grade NAME=%[1]s", stages[0].Name)
	return nil
}

func runStart(ctx context.Context, out *labenv.Printer, root string, stages []Stage, name string, reset bool) error {
	s, err := find(stages, name)
	if err != nil {
		return err
	}
	if err := s.checkInRepo(root); err != nil {
		return err
	}
	w, made, err := start(ctx, root, s, reset)
	if err != nil {
		return err
	}
	src, err := os.ReadFile(filepath.Join(root, s.File))
	if err != nil {
		return err
	}
	funcs, err := markedFuncs(s.File, src, s.Name)
	if err != nil {
		return err
	}
	var names []string
	for _, fn := range funcs {
		names = append(names, fn.Name.Name)
	}
	if made {
		out.Printf("stage %s (lab %.2s): %s", s.Name, s.Lab, s.Title)
		if reset {
			out.Printf("started over; your previous file is %s.orig", rel(w.File))
		}
	} else {
		out.Printf("stage %s is open already (make stage NAME=%[1]s RESET=1 starts over)", s.Name)
	}
	out.Printf("your file:  %s", rel(w.File))
	out.Printf("write:      %s — each one's doc comment says what it must do", strings.Join(names, ", "))
	out.Printf("it mirrors: %s", strings.Join(s.Upstream, "; "))
	out.Printf("judge it:   make grade NAME=%s", s.Name)
	out.Printf("run lab %.2s on it: %s", s.Lab, s.runCommand(rel(filepath.Join(w.Dir, "overlay.json"))))
	return nil
}

func runGrade(ctx context.Context, out *labenv.Printer, root string, stages []Stage, name string) error {
	s, err := find(stages, name)
	if err != nil {
		return err
	}
	w, err := workCopyOf(s)
	if err != nil {
		return err
	}
	if !w.open() {
		return fmt.Errorf("stage %s is not open: make stage NAME=%[1]s first", s.Name)
	}
	out.Printf("stage %s: go test -run '%s' %s, with %s in place of %s", s.Name, s.Tests, s.Package, rel(w.File), s.File)
	r, err := runGrader(ctx, root, w.Dir, s, w.File)
	if err != nil {
		return err
	}
	report(out, r)
	if r.ok() {
		out.Printf("stage %s: passed, %d of %d. Run lab %.2s on your code: %s", s.Name, len(r.Passed), len(r.Passed), s.Lab, s.runCommand(rel(filepath.Join(w.Dir, "overlay.json"))))
		return w.setPassed(true)
	}
	if err := w.setPassed(false); err != nil {
		return err
	}
	n := w.attempts() + 1
	if err := w.setAttempts(n); err != nil {
		return err
	}
	out.Printf("upstream:   %s", strings.Join(s.Upstream, "; "))
	for i := 0; i < n && i < len(s.Hints); i++ {
		out.Printf("hint %d:     %s", i+1, s.Hints[i])
	}
	if n > len(s.Hints) {
		out.Printf("solution:   the reference, %s (compare: git diff --no-index %s %s)", s.File, s.File, rel(w.File))
	} else {
		out.Printf("(each failed grade shows one hint more; after %d, where the solution is)", len(s.Hints))
	}
	if len(r.BuildErrors) > 0 {
		return fmt.Errorf("stage %s: your file does not compile yet", s.Name)
	}
	return fmt.Errorf("stage %s: %d of %d tests fail", s.Name, len(r.Failed), len(r.Failed)+len(r.Passed))
}

// report prints build errors, or one line per test and the failed ones'
// messages.
func report(out *labenv.Printer, r result) {
	if len(r.BuildErrors) > 0 {
		out.Printf("it does not compile:")
		for _, l := range limit(r.BuildErrors, 20) {
			out.Printf("  %s", l)
		}
		return
	}
	for _, t := range r.Passed {
		out.Printf("  pass  %s", t)
	}
	for _, t := range r.Failed {
		out.Printf("  FAIL  %s", t)
		for _, l := range limit(r.Messages[t], 8) {
			out.Printf("        %s", l)
		}
	}
}

func limit(lines []string, n int) []string {
	if len(lines) > n {
		return append(lines[:n:n], "…")
	}
	return lines
}

// rel shows a path relative to the working directory when it is below it
// (.labs/stages/…), absolute otherwise (a LABS_STATE_DIR elsewhere).
func rel(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if r, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}
