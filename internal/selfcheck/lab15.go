package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

func init() {
	register("15", labCheck{Title: "stop escalation: SIGTERM, the grace period, SIGKILL", Check: check15})
}

// check15 reads the record each run of lab 15 leaves (the lab removes its
// pod and containers, so nothing else is left): one per runtime, in the
// README's order, containerd then the mock.
func check15(_ context.Context, e *Env) []Result {
	return []Result{
		stopRecord(e, "containerd", "go run ./labs/15-stop-escalation --runtime containerd"),
		stopRecord(e, "mock", "go run ./labs/15-stop-escalation"),
	}
}

// containerStop is one line of lab 15's record:
// "part 1 polite exit 143 grace 3s took 1.153s".
type containerStop struct {
	part  int
	name  string
	exit  int
	grace int
	took  float64
}

func parseStops(text string) ([]containerStop, error) {
	var stops []containerStop
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var s containerStop
		if _, err := fmt.Sscanf(line, "part %d %s exit %d grace %ds took %fs", &s.part, &s.name, &s.exit, &s.grace, &s.took); err != nil {
			return nil, fmt.Errorf("line %q: %v", line, err)
		}
		stops = append(stops, s)
	}
	return stops, nil
}

// stopRecord checks the record of lab 15's last run on kind: in both
// parts, polite ended at SIGTERM (143) and stubborn by SIGKILL (137) once
// its grace was over — 3 s, then the deletion's 1 s raised to 2 s.
func stopRecord(e *Env, kind, command string) Result {
	rel := "15-stop-escalation/last-run-" + kind + ".txt"
	hint := "run the lab (Run it): " + command
	data, err := os.ReadFile(e.StatePath("15-stop-escalation", "last-run-"+kind+".txt"))
	if err != nil {
		return NotYet(fmt.Sprintf("no run on %s recorded yet (%s in the state folder)", kind, rel), hint)
	}
	stops, err := parseStops(string(data))
	if err != nil {
		return NotYet(fmt.Sprintf("%s: %v", rel, err), hint)
	}
	var seen []string
	for part, grace := range map[int]int{1: 3, 2: 2} {
		got := map[string]containerStop{}
		for _, s := range stops {
			if s.part == part {
				got[s.name] = s
			}
		}
		p, s := got["polite"], got["stubborn"]
		switch {
		case p.exit != 143 || s.exit != 137:
			return NotYet(fmt.Sprintf("on %s, part %d: polite exited %d and stubborn %d, not 143 and 137 (a pod of your own, with --pod?)", kind, part, p.exit, s.exit), hint+" (with the lab's own pod.yaml)")
		case s.grace != grace || time.Duration(s.took*float64(time.Second)) < time.Duration(grace)*time.Second-500*time.Millisecond:
			return NotYet(fmt.Sprintf("on %s, part %d: stubborn had %ds of grace and stopped after %.3fs, not %ds and at least that", kind, part, s.grace, s.took, grace), hint+" (without --delete-grace-period)")
		}
		seen = append(seen, fmt.Sprintf("part %d polite 143, stubborn 137 after %.1fs (grace %ds)", part, s.took, s.grace))
	}
	// map order: sort the two parts back
	if strings.HasPrefix(seen[0], "part 2") {
		seen[0], seen[1] = seen[1], seen[0]
	}
	return Done("on %s: %s", kind, strings.Join(seen, "; "))
}
