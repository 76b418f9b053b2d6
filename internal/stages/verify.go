package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"kubelet-labs/internal/labenv"
)

// verdict is what verifying one stage found.
type verdict struct {
	Stub, Reference result
	Err             error
}

// good: the stub compiles and fails at least one test, and the reference
// passes them all.
func (v verdict) good() bool {
	return v.Err == nil && len(v.Stub.BuildErrors) == 0 && len(v.Stub.Failed) > 0 && v.Reference.ok()
}

// verifyStage grades the stage's stub (in a folder of dir) and the
// reference.
func verifyStage(ctx context.Context, root, dir string, s Stage) verdict {
	if err := s.checkInRepo(root); err != nil {
		return verdict{Err: err}
	}
	src, err := os.ReadFile(filepath.Join(root, s.File))
	if err != nil {
		return verdict{Err: err}
	}
	stub, err := makeStub(s, src, listPackageNames(ctx, root))
	if err != nil {
		return verdict{Err: err}
	}
	yours := filepath.Join(dir, filepath.Base(s.File))
	if err := os.WriteFile(yours, stub, 0o600); err != nil {
		return verdict{Err: err}
	}
	var v verdict
	if v.Stub, err = runGrader(ctx, root, dir, s, yours); err != nil {
		return verdict{Err: err}
	}
	if v.Reference, err = runGrader(ctx, root, dir, s, ""); err != nil {
		return verdict{Err: err}
	}
	return v
}

func runVerify(ctx context.Context, out *labenv.Printer, root string, stages []Stage, name string) error {
	if name != "all" {
		s, err := find(stages, name)
		if err != nil {
			return err
		}
		stages = []Stage{s}
	}
	bad := 0
	for _, s := range stages {
		dir, err := os.MkdirTemp("", "stage-"+s.Name+"-")
		if err != nil {
			return err
		}
		v := verifyStage(ctx, root, dir, s)
		os.RemoveAll(dir)
		out.Printf("%-24s %s", s.Name, v.summary())
		if !v.good() {
			bad++
			for _, l := range v.details() {
				out.Printf("    %s", l)
			}
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d stages: the grader does not fail on the stub and pass on the reference", bad, len(stages))
	}
	return nil
}

func (v verdict) summary() string {
	if v.Err != nil {
		return "ERROR " + v.Err.Error()
	}
	verdict := "ok"
	if !v.good() {
		verdict = "BAD"
	}
	stub := fmt.Sprintf("%d of %d pass", len(v.Stub.Passed), len(v.Stub.Passed)+len(v.Stub.Failed))
	if len(v.Stub.BuildErrors) > 0 {
		stub = "does not compile"
	}
	return fmt.Sprintf("stub: %-16s reference: %d of %d pass   %s", stub, len(v.Reference.Passed), len(v.Reference.Passed)+len(v.Reference.Failed), verdict)
}

// details says why a verdict is not good.
func (v verdict) details() []string {
	var d []string
	if len(v.Stub.BuildErrors) > 0 {
		d = append(d, "the stub does not compile: "+strings.Join(limit(v.Stub.BuildErrors, 5), " | "))
	}
	if len(v.Stub.BuildErrors) == 0 && len(v.Stub.Failed) == 0 {
		d = append(d, "no test fails on the stub: the grader cannot tell an empty answer from a right one")
	}
	if len(v.Reference.BuildErrors) > 0 {
		d = append(d, "the reference does not compile: "+strings.Join(limit(v.Reference.BuildErrors, 5), " | "))
	}
	for _, t := range v.Reference.Failed {
		d = append(d, "the reference fails "+t+": "+strings.Join(limit(v.Reference.Messages[t], 3), " | "))
	}
	if len(v.Reference.Passed)+len(v.Reference.Failed) == 0 && len(v.Reference.BuildErrors) == 0 {
		d = append(d, "the tests pattern matches no test")
	}
	return d
}
