package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"kubelet-labs/hack/internal/benchkit"
	"kubelet-labs/internal/testenv"
)

// TestRoundsAlternate: no tool always runs first or always after another.
func TestRoundsAlternate(t *testing.T) {
	tools := []string{"kwok", "fleet"}
	for round, want := range [][]string{{"kwok", "fleet"}, {"fleet", "kwok"}, {"kwok", "fleet"}} {
		if got := roundOrder(tools, round); !slices.Equal(got, want) {
			t.Errorf("round %d: %v, want %v", round+1, got, want)
		}
	}
	if got := roundOrder([]string{"kwok", "fleet", "fleet-shared"}, 1); !slices.Equal(got, []string{"fleet", "fleet-shared", "kwok"}) {
		t.Errorf("three tools, round 2: %v", got)
	}
}

// TestTableShowsMediansAndSpread: three rounds of two tools make one
// column each, the median with the lowest and highest, and a round that
// started busy is named at the table's top and bottom.
func TestTableShowsMediansAndSpread(t *testing.T) {
	o := options{nodes: 10, pods: 100, qps: 200, burst: 200, kubeconfig: "k", tools: "kwok,fleet", RoundFlags: benchkit.RoundFlags{Rounds: 3}, LoadFlags: benchkit.LoadFlags{MaxLoad: 1}}
	var results []*result
	for round, all := range []time.Duration{50 * time.Second, 70 * time.Second, 60 * time.Second} {
		for _, tool := range roundOrder([]string{"kwok", "fleet"}, round) {
			r := &result{tool: tool, round: round, ownCalls: -1, allRunning: all, loadBefore: 0.4}
			if tool == "fleet" {
				r.allRunning += 5 * time.Second
				r.busy = round == 1
				if r.busy {
					r.loadBefore = 3.5
				}
			}
			results = append(results, r)
		}
	}
	table := formatTable(o, &env{version: "v1.36.3"}, results, nil)
	for _, want := range []string{
		"3 rounds, each in another order",
		"60.0 s (50–70)", // KWOK: median of 50, 70, 60
		"65.0 s (55–75)", // ours
		"fleet in round 2 started at load 3.50",
		"0.40 busy (0.4–3.5)", // the median, marked: one round was busy
	} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
	if n := strings.Count(table, "WARNING: A BUSY MACHINE"); n != 2 {
		t.Errorf("the busy warning appears %d times, want at the top and the bottom:\n%s", n, table)
	}
	if header := strings.Count(table, "KWOK v0.7.0"); header < 1 || strings.Count(table, "   ours, as nodes") != 1 {
		t.Errorf("want one column per tool, not per round:\n%s", table)
	}
}

// TestBusyMachineIsRefused: above the threshold the run does not start,
// unless --allow-busy; the error says what to do.
func TestBusyMachineIsRefused(t *testing.T) {
	defer func(f func() (float64, error)) { loadAvg1 = f }(loadAvg1)
	loadAvg1 = func() (float64, error) { return 1e6, nil }
	o := options{nodes: 1, pods: 1, qps: 1, burst: 1, tools: "kwok", timeout: time.Minute, RoundFlags: benchkit.RoundFlags{Rounds: 1}, LoadFlags: benchkit.LoadFlags{MaxLoad: 1}}
	_, err := run(context.Background(), o, &testenv.SyncBuffer{})
	if err == nil || !strings.Contains(err.Error(), "the machine is busy") || !strings.Contains(err.Error(), "--allow-busy") {
		t.Fatalf("got %v, want the busy machine refused", err)
	}
	o.AllowBusy = true
	if err := checkQuiet(o); err != nil {
		t.Errorf("with --allow-busy: %v", err)
	}
	if load, busy := waitQuiet(context.Background(), o, t.Logf); !busy || load != 1e6 {
		t.Errorf("waitQuiet with --allow-busy: %v %v, want the load and busy", load, busy)
	}
}

// TestLoadIsRead: /proc gives a load and a machine CPU time that grows.
func TestLoadIsRead(t *testing.T) {
	if _, err := procLoadAvg1(); err != nil {
		t.Fatal(err)
	}
	a, err := machineCPU()
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
	}
	b, _ := machineCPU()
	if b <= a-time.Second || selfCPU() <= 0 {
		t.Errorf("machine CPU %v then %v, own CPU %v", a, b, selfCPU())
	}
}
