package main

import (
	"context"
	"flag"
	"fmt"
	"regexp"
	"strings"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/state"
)

func main() { labenv.Main(command()) }

// command is the self-check as labenv runs it: its flags, the check of
// --lab (a clear one-line error, exit 2, before anything runs) and the run.
func command() labenv.Lab {
	var arg, lab, name string
	var exercise bool
	return labenv.Lab{
		Name:    "selfcheck",
		Command: "make check LAB=NN [EXERCISE=1]  (go run ./internal/selfcheck --lab NN [--exercise])",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&arg, "lab", "", "the lab to check: its number, 0 to 18 (7 or 07), or its folder (07-pleg)")
			fs.BoolVar(&exercise, "exercise", false, "also run the lab's exercise test (labs/NN-name/exercise_test.go)")
		},
		Check: func() error {
			var err error
			lab, name, err = parseLab(arg)
			return err
		},
		Run: func(ctx context.Context, out *labenv.Printer) error {
			root, err := state.Root()
			if err != nil {
				return err
			}
			folder, err := labFolder(root, lab)
			if err != nil {
				return err
			}
			if name != "" && name != folder {
				return fmt.Errorf("--lab %s: lab %s is %s", arg, lab, folder)
			}
			return run(ctx, out, root, lab, folder, exercise)
		},
	}
}

// labArg is what --lab takes: a lab's number, one digit or two, or its
// folder, as a shell completes it (labs/07-pleg/).
var labArg = regexp.MustCompile(`^(?:\./)?(?:labs/)?([0-9]{1,2})(-[a-z0-9-]+)?/?$`)

// parseLab turns --lab into the lab's two-digit number ("7" and
// "07-pleg" are "07") and the folder name given, if any; anything else is
// a one-line error that says what to write.
func parseLab(arg string) (lab, folder string, err error) {
	if strings.TrimSpace(arg) == "" {
		return "", "", fmt.Errorf("no lab given: say which, e.g. make check LAB=07 (labs: %s)", knownLabs())
	}
	m := labArg.FindStringSubmatch(strings.TrimSpace(arg))
	if m == nil {
		return "", "", fmt.Errorf("--lab %q: want a lab's number or folder, e.g. make check LAB=7, LAB=07 or LAB=07-pleg (labs: %s)", arg, knownLabs())
	}
	lab = fmt.Sprintf("%02s", m[1])
	if _, ok := checks[lab]; !ok {
		return "", "", fmt.Errorf("--lab %s: no such lab (labs: %s)", arg, knownLabs())
	}
	if m[2] != "" {
		folder = lab + m[2]
	}
	return lab, folder, nil
}

// run prints the lab's checks and, if asked, its exercise test; it fails
// (exit 1) when something is not done yet.
func run(ctx context.Context, out *labenv.Printer, root, lab, folder string, exercise bool) error {
	c := checks[lab]
	out.Printf("lab %s · %s — what your run left:", lab, c.Title)
	results := c.Check(ctx, &Env{})
	done := report(out, results)
	out.Printf("%d of %d done.", done, len(results))
	ex := solved
	if exercise {
		ex = runExercise(ctx, out, root, folder)
	} else {
		out.Printf("The exercise (README, section Exercise): make check LAB=%s EXERCISE=1 tells whether you solved it.", lab)
	}
	return outcome(lab, len(results)-done, len(results), ex)
}

// outcome is the run's last word: nil when everything is done and the
// exercise (if asked for) solved; else what is missing, and a non-zero
// exit. An exercise test that skipped checked nothing: not solved.
func outcome(lab string, notDone, of int, ex verdict) error {
	var missing []string
	if notDone > 0 {
		missing = append(missing, fmt.Sprintf("%d of %d not done yet", notDone, of))
	}
	switch ex {
	case notChecked:
		missing = append(missing, "the exercise was not checked (its test skipped)")
	case notSolved, notRun:
		missing = append(missing, "the exercise is not solved yet")
	}
	if len(missing) > 0 {
		return fmt.Errorf("lab %s: %s", lab, strings.Join(missing, ", and "))
	}
	return nil
}

// report prints one line per result (a hint under each that is not done)
// and returns how many are done.
func report(out *labenv.Printer, results []Result) int {
	done := 0
	for _, r := range results {
		if r.Done {
			done++
			out.Printf("  done     %s", r.What)
			continue
		}
		out.Printf("  not yet  %s", r.What)
		if r.Hint != "" {
			out.Printf("           hint: %s", r.Hint)
		}
	}
	return done
}
