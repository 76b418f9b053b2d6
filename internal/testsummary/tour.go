package main

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// The tour is TestLabREADMEs (internal/readmerun): every lab's README typed
// as a learner types it, in order, lab 00's control plane left running
// under all of them — and, in each README, the lab's self-check (make check
// LAB=NN). The summary adds a table with one line per lab: how it ended,
// how long it took, how many commands ran, and what the self-check said.
// `make tour` runs only that test; `make test` (and CI) print the same
// table at the end.
const (
	tourPackageSuffix = "/internal/readmerun"
	tourTest          = "TestLabREADMEs"
)

// tourLab is one lab's README run.
type tourLab struct {
	name      string
	action    string  // pass, fail, skip
	elapsed   float64 // seconds
	commands  int     // command blocks run
	shownOnly int     // command blocks shown but not run (root, Ctrl-C…)
	title     string  // the self-check's name for the lab's concept
	check     string  // the self-check's verdict, "4 of 4 done"
	reason    string  // skip: why
}

// tour collects the labs in the order they ran.
type tour struct {
	labs  []*tourLab
	byKey map[string]*tourLab
}

var (
	// what internal/readmerun logs for a block it ran, and for one it showed only
	blockRan  = regexp.MustCompile(`^\s*\S+\.go:\d+: line \d+ \([^,]+, exit -?\d+\):`)
	blockShow = regexp.MustCompile(`^\s*\S+\.go:\d+: line \d+: not run \(`)
	// what internal/selfcheck prints
	checkTitle = regexp.MustCompile(`lab \d\d · (.+) — what your run left:`)
	checkDone  = regexp.MustCompile(`^\s*(\d+ of \d+ done)\.\s*$`)
)

// labOf returns the lab a test event belongs to ("07-pleg"), if it is one
// of the tour's subtests or deeper.
func labOf(ev event) (string, bool) {
	if !strings.HasSuffix(ev.Package, tourPackageSuffix) {
		return "", false
	}
	rest, ok := strings.CutPrefix(ev.Test, tourTest+"/")
	if !ok {
		return "", false
	}
	lab, _, _ := strings.Cut(rest, "/")
	return lab, true
}

func (t *tour) handle(ev event) {
	name, ok := labOf(ev)
	if !ok {
		return
	}
	if t.byKey == nil {
		t.byKey = map[string]*tourLab{}
	}
	l := t.byKey[name]
	if l == nil {
		l = &tourLab{name: name}
		t.byKey[name] = l
		t.labs = append(t.labs, l)
	}
	switch ev.Action {
	case "output":
		line := strings.TrimRight(ev.Output, "\n")
		switch {
		case blockRan.MatchString(line):
			l.commands++
		case blockShow.MatchString(line):
			l.shownOnly++
		}
		if m := checkTitle.FindStringSubmatch(line); m != nil {
			l.title = m[1]
		}
		if m := checkDone.FindStringSubmatch(line); m != nil {
			l.check = m[1]
		}
		if t := strings.TrimSpace(location.ReplaceAllString(line, "")); t != "" && !strings.HasPrefix(t, "=== ") && !strings.HasPrefix(t, "--- ") {
			l.reason = t
		}
	case "pass", "fail", "skip":
		if ev.Test == tourTest+"/"+name {
			l.action, l.elapsed = ev.Action, ev.Elapsed
		}
	}
}

// print writes the table, if the run had a tour.
func (t *tour) print(w interface{ Write([]byte) (int, error) }) {
	if len(t.labs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n== the tour (%s: each lab's README typed as a learner would, then make check LAB=NN)\n", tourTest)
	for _, l := range t.labs {
		action := l.action
		if action == "" {
			action = "unfinished"
		}
		took := time.Duration(l.elapsed * float64(time.Second)).Round(time.Second)
		line := fmt.Sprintf("  %-22s %-10s %7s  %2d command%s", l.name, action, took, l.commands, plural(l.commands))
		if l.shownOnly > 0 {
			line += fmt.Sprintf(" (+%d shown only)", l.shownOnly)
		}
		switch {
		case l.action == "skip":
			line += "  skipped: " + l.reason
		case l.check != "":
			line += fmt.Sprintf("  self-check: %s: %s", l.title, l.check)
		default:
			line += "  self-check: not reached"
		}
		fmt.Fprintln(w, line)
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
