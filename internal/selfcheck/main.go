package main

import (
	"context"
	"flag"
	"fmt"
	"regexp"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/state"
)

func main() {
	var lab string
	var exercise bool
	labenv.Main(labenv.Lab{
		Name:    "selfcheck",
		Command: "make check LAB=NN [EXERCISE=1]  (go run ./internal/selfcheck --lab NN [--exercise])",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&lab, "lab", "", "the lab to check: its number, 00 to 18")
			fs.BoolVar(&exercise, "exercise", false, "also run the lab's exercise test (labs/NN-name/exercise_test.go)")
		},
		Check: func() error {
			if !regexp.MustCompile(`^[0-9]{2}$`).MatchString(lab) {
				return fmt.Errorf("--lab %q: want a lab's two-digit number, e.g. make check LAB=07", lab)
			}
			if _, ok := checks[lab]; !ok {
				return fmt.Errorf("--lab %s: no such lab (labs: %s)", lab, knownLabs())
			}
			return nil
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
			return run(ctx, out, root, lab, folder, exercise)
		},
	})
}

// run prints the lab's checks and, if asked, its exercise test; it fails
// (exit 1) when something is not done yet.
func run(ctx context.Context, out *labenv.Printer, root, lab, folder string, exercise bool) error {
	c := checks[lab]
	out.Printf("lab %s · %s — what your run left:", lab, c.Title)
	results := c.Check(ctx, &Env{})
	done := report(out, results)
	out.Printf("%d of %d done.", done, len(results))
	solved := true
	if exercise {
		solved = runExercise(ctx, out, root, folder)
	} else {
		out.Printf("The exercise (README, section Exercise): make check LAB=%s EXERCISE=1 tells whether you solved it.", lab)
	}
	switch {
	case done < len(results) && !solved:
		return fmt.Errorf("lab %s: %d of %d not done yet, and the exercise not solved", lab, len(results)-done, len(results))
	case done < len(results):
		return fmt.Errorf("lab %s: %d of %d not done yet", lab, len(results)-done, len(results))
	case !solved:
		return fmt.Errorf("lab %s: the exercise is not solved yet", lab)
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
