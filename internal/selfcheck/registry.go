package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// labCheck is what the self-check knows about one lab.
type labCheck struct {
	// Title names the lab's concept in a few words, for the first line.
	Title string
	// Check looks at what the learner's run left and returns one result
	// per thing the lab's README has them do, in the README's order.
	Check func(ctx context.Context, e *Env) []Result
}

// checks holds every lab's checks by number ("07"); labNN.go files add
// theirs in an init function.
var checks = map[string]labCheck{}

func register(lab string, c labCheck) {
	if _, dup := checks[lab]; dup {
		panic("selfcheck: lab " + lab + " registered twice")
	}
	checks[lab] = c
}

// Result is one thing a lab has the learner do.
type Result struct {
	Done bool
	What string // what was seen (done) or is missing (not yet)
	Hint string // not yet: what to do about it, naming the README's step
}

// Done is a result for something the run did; What says what was seen.
func Done(format string, args ...any) Result {
	return Result{Done: true, What: fmt.Sprintf(format, args...)}
}

// NotYet is a result for something missing, with the hint to fix it.
func NotYet(what, hint string) Result { return Result{What: what, Hint: hint} }

// labFolder finds labs/NN-* under the repository root.
func labFolder(root, lab string) (string, error) {
	matches, err := filepath.Glob(filepath.Join(root, "labs", lab+"-*"))
	if err != nil || len(matches) != 1 {
		return "", fmt.Errorf("no lab %s: want a number from 00 to 18 (labs/%s-*)", lab, lab)
	}
	return filepath.Base(matches[0]), nil
}

// knownLabs lists the registered lab numbers in order, for messages.
func knownLabs() string {
	var ids []string
	for id := range checks {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return strings.Join(ids, " ")
}

// exists reports whether path exists (for checks of the state folder).
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
