package main

import (
	"strings"
	"testing"
)

// TestLab09Ops: the record of a whole README run is five times done; a
// forced delete needs its REMOVE; mirror pods (the exercise's) count for
// nothing; an empty record is five times not yet.
func TestLab09Ops(t *testing.T) {
	whole := `2026-11-26T04:22:30Z ADD default/web
2026-11-26T04:22:31Z UPDATE default/web
2026-11-26T04:22:32Z RECONCILE default/web
2026-11-26T04:22:33Z DELETE default/web grace=30
2026-11-26T04:22:34Z DELETE default/web grace=0
2026-11-26T04:22:34Z REMOVE default/web
`
	for _, c := range []struct {
		name, record string
		done         string // one letter per result: d done, n not yet
	}{
		{"whole run", whole, "ddddd"},
		{"empty", "", "nnnnn"},
		{"forced delete without its REMOVE", strings.Join(strings.Split(whole, "\n")[:5], "\n"), "ddddn"},
		{"mirror pods only", "t ADD default/m mirror\nt DELETE default/m grace=0 mirror\nt REMOVE default/m mirror\n", "nnnnn"},
		{"a graceful delete only", "t DELETE default/web grace=30\ngarbage\n", "nnndn"},
	} {
		results := lab09Ops(parseLab09Record(c.record), "ops.log")
		got := ""
		for _, r := range results {
			if r.Done {
				got += "d"
			} else {
				got += "n"
				if r.Hint == "" {
					t.Errorf("%s: %q has no hint", c.name, r.What)
				}
			}
		}
		if got != c.done {
			t.Errorf("%s: %s, want %s: %+v", c.name, got, c.done, results)
		}
	}
}
