package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"kubelet-labs/internal/checkout"
	"kubelet-labs/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// labFolders lists labs/NN-name under the repository root.
func labFolders(t *testing.T, root string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(root, "labs", "[0-9][0-9]-*"))
	if err != nil || len(paths) < 19 {
		t.Fatalf("found %d labs (%v): want 00-18", len(paths), err)
	}
	var folders []string
	for _, p := range paths {
		folders = append(folders, filepath.Base(p))
	}
	slices.Sort(folders)
	return folders
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestEveryLabHasACheckAnExerciseTestAndASolution: the course's promise,
// lab by lab — a self-check, an exercise test that starts with
// testenv.Exercise, a solution patch, and both READMEs telling the learner
// how to check (make check LAB=NN) and where the solution is.
func TestEveryLabHasACheckAnExerciseTestAndASolution(t *testing.T) {
	if exerciseEnvVar != testenv.ExerciseEnvVar {
		t.Fatalf("exerciseEnvVar %q != testenv.ExerciseEnvVar %q", exerciseEnvVar, testenv.ExerciseEnvVar)
	}
	root := repoRoot(t)
	for _, folder := range labFolders(t, root) {
		lab := folder[:2]
		t.Run(folder, func(t *testing.T) {
			if _, ok := checks[lab]; !ok {
				t.Errorf("no self-check: add internal/selfcheck/lab%s.go", lab)
			}
			test, err := os.ReadFile(filepath.Join(root, "labs", folder, "exercise_test.go"))
			if err != nil || !regexp.MustCompile(`func `+exerciseTest+`\(t \*testing\.T\) \{\n\ttestenv\.Exercise\(t\)`).Match(test) {
				t.Errorf("labs/%s/exercise_test.go: want func %s(t *testing.T) starting with testenv.Exercise(t) (%v)", folder, exerciseTest, err)
			}
			// a lab's main.go changes; its solution must still apply, and
			// this says so in seconds, not at the end of the solved run
			patch := filepath.Join(root, "solutions", folder+".patch")
			if _, err := os.Stat(patch); err != nil {
				t.Errorf("no solution: %v", err)
			} else if out, err := exec.Command("git", "-C", root, "apply", "--check", "--whitespace=nowarn", patch).CombinedOutput(); err != nil {
				t.Errorf("solutions/%s.patch no longer applies to labs/%s (git apply --check: %v): remake it from a solved main.go\n%s", folder, folder, err, out)
			}
			for _, readme := range []string{"README.md", "README.zh-CN.md"} {
				b, err := os.ReadFile(filepath.Join(root, "labs", folder, readme))
				if err != nil {
					t.Fatal(err)
				}
				for _, want := range []string{"make check LAB=" + lab + "\n", "make check LAB=" + lab + " EXERCISE=1", "solutions/" + folder + ".patch"} {
					if !bytes.Contains(b, []byte(want)) {
						t.Errorf("labs/%s/%s does not say %q", folder, readme, strings.TrimSpace(want))
					}
				}
			}
		})
	}
}

// runExerciseTests runs every lab's exercise test in dir (the repository or
// a copy) and returns each lab folder's result, judged as make check
// judges one ("pass", "fail", "skip": TestExercise or a part of it
// skipped, "did not run"), and the output of each.
func runExerciseTests(t *testing.T, dir, stateDir string, extra ...string) (map[string]string, map[string]string) {
	t.Helper()
	args := append([]string{"test", "-count=1", "-json", "-timeout", "20m", "-run", "^" + exerciseTest + "$"}, extra...)
	cmd := exec.Command("go", append(args, "./labs/...")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), testenv.ExerciseEnvVar+"=1", "LABS_STATE_DIR="+stateDir)
	out, _ := cmd.Output() // a failing test is an exit 1; the events say which
	results, output := map[string]string{}, map[string]string{}
	for pkg, r := range judgeExercises(out) {
		folder, ok := strings.CutPrefix(pkg, labsPackage)
		if !ok || strings.Contains(folder, "/") {
			continue
		}
		results[folder] = map[verdict]string{solved: "pass", notSolved: "fail", notChecked: "skip", notRun: "did not run"}[r.Verdict]
		output[folder] = strings.Join(append(r.Lines, r.Skips...), "\n")
	}
	return results, output
}

// TestExercisesFailUntilSolved: every exercise test fails on the code as
// it is (a test that cannot fail proves nothing), and passes once
// solutions/NN-name.patch is applied — all the patches together, in a
// copy of the checkout, so no solution rots and none breaks another.
func TestExercisesFailUntilSolved(t *testing.T) {
	root := repoRoot(t)
	_, binDir := testenv.Binaries(t) // the copy uses the built control plane
	stateDir := filepath.Dir(binDir)
	folders := labFolders(t, root)

	t.Run("unsolved", func(t *testing.T) {
		// -race like `make test`: its test binaries are in the build cache
		results, output := runExerciseTests(t, root, stateDir, "-race")
		for _, folder := range folders {
			if results[folder] != "fail" {
				t.Errorf("labs/%s: TestExercise %s on the unsolved code, want fail:\n%s", folder, orNone(results[folder]), output[folder])
			}
		}
	})
	t.Run("solved", func(t *testing.T) {
		copyDir := t.TempDir()
		if err := checkout.Copy(root, copyDir); err != nil {
			t.Fatal(err)
		}
		for _, folder := range folders {
			patch := filepath.Join(root, "solutions", folder+".patch")
			if _, err := os.Stat(patch); err != nil {
				continue // TestEveryLabHasACheckAnExerciseTestAndASolution says so
			}
			if out, err := exec.Command("git", "-C", copyDir, "apply", "--whitespace=nowarn", patch).CombinedOutput(); err != nil {
				t.Fatalf("git apply solutions/%s.patch: %v\n%s", folder, err, out)
			}
		}
		// without -race: a copy elsewhere compiles this module's packages
		// anew (their folder is part of the cache key), and the race
		// detector's instrumentation would double that
		results, output := runExerciseTests(t, copyDir, stateDir)
		for _, folder := range folders {
			if results[folder] != "pass" {
				t.Errorf("labs/%s: TestExercise %s with solutions/%s.patch applied, want pass:\n%s", folder, orNone(results[folder]), folder, output[folder])
			}
		}
	})
}

func orNone(s string) string {
	if s == "" {
		return "did not run"
	}
	return s
}
