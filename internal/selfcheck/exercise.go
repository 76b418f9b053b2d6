package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"

	"kubelet-labs/internal/labenv"
)

// exerciseTest is the name every lab's exercise test has.
const exerciseTest = "TestExercise"

// exerciseEnvVar turns the exercise tests on: exerciseEnvVar (not
// imported: a command has no business linking the testing package).
const exerciseEnvVar = "LABS_EXERCISE"

// exerciseCommand is the go test command that runs labs/<folder>'s
// exercise test, as the self-check and CI run it.
func exerciseCommand(ctx context.Context, root, folder string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-run", "^"+exerciseTest+"$", "./labs/"+folder)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), exerciseEnvVar+"=1")
	return cmd
}

// runExercise runs the lab's exercise test and says solved, or not yet
// with the test's own failure lines.
func runExercise(ctx context.Context, out *labenv.Printer, root, folder string) bool {
	out.Printf("exercise: go test -run %s ./labs/%s (%s=1) …", exerciseTest, folder, exerciseEnvVar)
	var buf bytes.Buffer
	cmd := exerciseCommand(ctx, root, folder)
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err == nil {
		out.Printf("exercise: solved.")
		return true
	}
	out.Printf("exercise: not solved yet. The test says:")
	for _, line := range failureLines(buf.String()) {
		out.Printf("  %s", line)
	}
	out.Printf("Hints are in the README's Exercise section; the solution is solutions/%s.patch.", folder)
	return false
}

// failureLines keeps what a learner needs from go test's output: the
// test's own messages, not the FAIL/ok trailer lines.
func failureLines(out string) []string {
	var keep []string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		t := strings.TrimSpace(line)
		if t == "" || t == "FAIL" || strings.HasPrefix(t, "FAIL\t") || strings.HasPrefix(t, "ok  \t") || strings.HasPrefix(t, "exit status") {
			continue
		}
		keep = append(keep, line)
	}
	if len(keep) > 40 {
		keep = append(keep[:40], "…")
	}
	return keep
}
