package main

import (
	"kubelet-labs/hack/internal/benchkit"
	"strings"
	"testing"
)

// TestTableShowsMediansAndGoals: three rounds of two kubelets on one
// runtime make one column each — the median with the lowest and highest
// in the row's own unit — and ours is set against the real kubelet with
// issue 41's goals, each said met or missed.
func TestTableShowsMediansAndGoals(t *testing.T) {
	o := options{pods: 100, RoundFlags: benchkit.RoundFlags{Rounds: 3}, runtimes: "mock", kubelets: "real,ours", LoadFlags: benchkit.LoadFlags{MaxLoad: 1}, qps: 100, burst: 100}
	var results []*result
	for round, p50 := range []float64{0.5, 0.7, 0.6} {
		for _, k := range []string{"real", "ours"} {
			r := &result{kubelet: k, runtime: "mock", round: round, loadBefore: 0.4, v: map[string]float64{
				keyRunP50: p50, keyAllGone: 10, keyAPICreate: 3, keyAPIDelete: 2, keyRSS: 200}}
			if k == "ours" {
				r.v[keyRunP50] = p50 / 2 // half the real's: met
				r.v[keyRSS] = 150        // 0.75 of the real's: missed
				r.busy, r.loadBefore = round == 1, 3.5
			}
			results = append(results, r)
		}
	}
	table := formatTable(o, &env{version: "v1.36.3"}, results, []string{"ours kubelet on mock, round 4: pods: timed out"})
	for _, want := range []string{
		"3 rounds",
		"real kubelet, mock CRI", "ours, mock CRI",
		"600 ms (500–700)", // the real's create → Running: median of 500, 700, 600
		"300 ms (250–350)", // ours
		"ours on mock in round 2 started at load 3.50",
		"FAILED (no cell): ours kubelet on mock, round 4",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
	for measure, want := range map[string][]string{
		"create → Running, p50": {"0.50×", "≤ 1.0×", "met"},
		"peak RSS":              {"0.75×", "≤ 0.5×", "MISSED"},
	} {
		line := goalLine(table, measure)
		for _, w := range want {
			if !strings.Contains(line, w) {
				t.Errorf("the goal line of %s is %q, want %q in it", measure, line, w)
			}
		}
	}
	if n := strings.Count(table, "WARNING: A BUSY MACHINE"); n != 2 {
		t.Errorf("the busy warning appears %d times, want at the top and the bottom:\n%s", n, table)
	}
}

// goalLine is the line of a measure in the table's goals block.
func goalLine(table, measure string) string {
	_, goals, _ := strings.Cut(table, "issue 41's goals")
	for _, l := range strings.Split(goals, "\n") {
		if strings.Contains(l, measure) {
			return l
		}
	}
	return ""
}
