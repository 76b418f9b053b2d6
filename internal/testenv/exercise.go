package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// ExerciseEnvVar turns a lab's exercise test on. `make test` leaves it
// unset, so an unsolved exercise does not fail the course's own tests;
// `make check LAB=NN EXERCISE=1` (internal/selfcheck) sets it, and so does
// CI, once on the code as it is (every exercise test must fail there) and
// once with every solution of solutions/ applied (every one must pass).
const ExerciseEnvVar = "LABS_EXERCISE"

// Exercise skips the calling test unless the exercise tests were asked
// for. Every lab's exercise_test.go starts its TestExercise with it.
func Exercise(t *testing.T) {
	t.Helper()
	if os.Getenv(ExerciseEnvVar) != "1" {
		wd, _ := os.Getwd()
		lab := filepath.Base(wd)
		t.Skipf("the exercise of labs/%s: it fails until you solve it; run it with make check LAB=%.2s EXERCISE=1", lab, lab)
	}
}
