package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := state.Root()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestEveryStageFailsOnItsStubAndPassesOnItsReference is the proof the
// issue asks for: a grader that cannot fail judges nothing, and one the
// reference fails would send a learner after a wrong answer.
func TestEveryStageFailsOnItsStubAndPassesOnItsReference(t *testing.T) {
	root := repoRoot(t)
	stages, err := loadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stages {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			v := verifyStage(context.Background(), root, t.TempDir(), s)
			if !v.good() {
				t.Errorf("%s: %s\n%s", s.Name, v.summary(), strings.Join(v.details(), "\n"))
			}
		})
	}
}

// TestEveryMarkerBelongsToAStage: a //stage: directive the catalog does
// not know is a stage nobody can open (a renamed entry, a typo).
func TestEveryMarkerBelongsToAStage(t *testing.T) {
	root := repoRoot(t)
	stages, err := loadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]string{}
	for _, s := range stages {
		known[s.Name] = s.File
	}
	marker := regexp.MustCompile(`(?m)^\s*` + markerPrefix + `(\S+)\s*$`)
	err = filepath.WalkDir(filepath.Join(root, "mycore"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, m := range marker.FindAllStringSubmatch(string(src), -1) {
			if file, ok := known[m[1]]; !ok || file != rel {
				t.Errorf("%s: %s%s, but the catalog has no stage %q with that file", rel, markerPrefix, m[1], m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestALearnerOpensGradesAndSolvesAStage walks the first stage as a
// learner does: open it, grade the stub (fails, one hint), grade again
// (two hints), put the solution in their file, grade (passes).
func TestALearnerOpensGradesAndSolvesAStage(t *testing.T) {
	root := repoRoot(t)
	t.Setenv(state.EnvVar, t.TempDir())
	stages, err := loadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	s := stages[0]
	ctx := context.Background()
	var out bytes.Buffer
	p := labenv.NewPrinter(&out)

	if err := runStart(ctx, p, root, stages, s.Name, false); err != nil {
		t.Fatalf("make stage NAME=%s: %v", s.Name, err)
	}
	w, err := workCopyOf(s)
	if err != nil {
		t.Fatal(err)
	}
	stub, err := os.ReadFile(w.File)
	if err != nil {
		t.Fatalf("make stage left no file for the learner: %v", err)
	}
	if !strings.Contains(out.String(), "your file:") || !strings.Contains(string(stub), "yours to write") {
		t.Fatalf("make stage said:\n%s\nand wrote:\n%s", out.String(), stub)
	}
	// the lab runs on the learner's file with the overlay make stage names
	overlay, err := os.ReadFile(filepath.Join(w.Dir, "overlay.json"))
	if err != nil || !strings.Contains(string(overlay), `"`+filepath.Join(root, s.File)+`":"`+w.File+`"`) {
		t.Errorf("overlay.json = %s (%v), want %s replaced by %s", overlay, err, s.File, w.File)
	}
	if !strings.Contains(out.String(), s.runCommand(filepath.Join(w.Dir, "overlay.json"))) {
		t.Errorf("make stage does not say how to run lab %s on the learner's file:\n%s", s.Lab, out.String())
	}

	for attempt := 1; attempt <= 2; attempt++ {
		out.Reset()
		err := runGrade(ctx, p, root, stages, s.Name)
		if err == nil || !strings.Contains(err.Error(), "tests fail") {
			t.Fatalf("grade %d of the stub: %v, want tests that fail\n%s", attempt, err, out.String())
		}
		if got := strings.Count(out.String(), "\nhint "); got != min(attempt, len(s.Hints)) {
			t.Errorf("grade %d showed %d hints, want %d:\n%s", attempt, got, min(attempt, len(s.Hints)), out.String())
		}
		if !strings.Contains(out.String(), "  FAIL  ") {
			t.Errorf("grade %d names no failed test:\n%s", attempt, out.String())
		}
	}

	out.Reset()
	if err := runStart(ctx, p, root, stages, s.Name, false); err != nil || !strings.Contains(out.String(), "open already") {
		t.Errorf("make stage on an open stage: %v\n%s (want it left as it is)", err, out.String())
	}
	ref, err := os.ReadFile(filepath.Join(root, s.File))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.File, ref, 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := runGrade(ctx, p, root, stages, s.Name); err != nil {
		t.Fatalf("grade of the reference: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "passed") || !w.passed() {
		t.Errorf("grade of the reference said:\n%s", out.String())
	}
	out.Reset()
	if err := list(p, stages); err != nil || !regexp.MustCompile(`(?m)^\s+\d\d\s+`+s.Name+`\s+passed`).MatchString(out.String()) {
		t.Errorf("make stage (the list) after passing: %v\n%s", err, out.String())
	}
}

func TestGradingAStageNotOpenSaysHowToOpenIt(t *testing.T) {
	t.Setenv(state.EnvVar, t.TempDir())
	stages, err := loadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	err = runGrade(context.Background(), labenv.NewPrinter(&bytes.Buffer{}), repoRoot(t), stages, stages[0].Name)
	if err == nil || !strings.Contains(err.Error(), "make stage NAME="+stages[0].Name+" first") {
		t.Errorf("err = %v", err)
	}
	if _, err := find(stages, "no-such-stage"); err == nil || !strings.Contains(err.Error(), stages[0].Name) {
		t.Errorf("find of an unknown stage: %v, want the list of stages", err)
	}
}

// TestTheMakeTargetsAsTheCoursePageTypesThem: docs/build-it.md's commands,
// through make, as a learner types them — make stage lists, make stage
// NAME= opens, make grade NAME= on the untouched stub fails with the first
// hint, make grade without NAME says which stage? in one line.
func TestTheMakeTargetsAsTheCoursePageTypesThem(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	root := repoRoot(t)
	stages, err := loadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	s := stages[0]
	env := append(os.Environ(), state.EnvVar+"="+t.TempDir())
	run := func(args ...string) (string, int) {
		cmd := exec.Command("make", append([]string{"--no-print-directory", "-C", root}, args...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return string(out), exit.ExitCode()
		}
		if err != nil {
			t.Fatalf("make %s: %v", strings.Join(args, " "), err)
		}
		return string(out), 0
	}
	if out, code := run("stage"); code != 0 || !strings.Contains(out, s.Name) {
		t.Errorf("make stage: exit %d\n%s", code, out)
	}
	if out, code := run("stage", "NAME="+s.Name); code != 0 || !strings.Contains(out, "your file:") {
		t.Errorf("make stage NAME=%s: exit %d\n%s", s.Name, code, out)
	}
	if out, code := run("grade", "NAME="+s.Name); code == 0 || !strings.Contains(out, "hint 1:") || !strings.Contains(out, "error: stage "+s.Name) {
		t.Errorf("make grade NAME=%s on the stub: exit %d, want a failure with hint 1\n%s", s.Name, code, out)
	}
	if out, code := run("grade"); code == 0 || !strings.Contains(out, "error: which stage?") {
		t.Errorf("make grade without NAME: exit %d\n%s", code, out)
	}
}
