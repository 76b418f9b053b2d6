package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestBenchSmall runs the whole benchmark at a small size against the
// test control plane: each tool (KWOK, our fleet as nodes, our fleet as
// the admin) makes its nodes Ready, every pod goes Running and, deleted,
// gone; the table has a column for each tool and a value in every row.
// The fleet must delete each pod once and waste no call. Timings are
// logged, not asserted.
//
// It needs KWOK v0.7.0 built (scripts/build-kwok.sh); without it the test
// is skipped and says how to build it.
func TestBenchSmall(t *testing.T) {
	bin, err := state.Path("bin", "kwok")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("KWOK v0.7.0 is not built (%s missing): run scripts/build-kwok.sh, then this test compares KWOK and fleet mode at 5 nodes / 20 pods", bin)
	}
	const nodes, pods = 5, 20
	out := filepath.Join(t.TempDir(), "table.txt")
	o := options{cp: testenv.ControlPlane(t), dir: t.TempDir(), nodes: nodes, pods: pods, qps: 200, burst: 200, fleetQPS: -1,
		tools: "kwok,fleet,fleet-shared", timeout: 2 * time.Minute, out: out,
		// CI's machine is busy with other tests: say so, do not refuse
		rounds: 1, maxLoad: 1, allowBusy: true}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	log := &testenv.SyncBuffer{}
	results, err := run(ctx, o, log)
	t.Logf("benchmark output:\n%s", log)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 3 || results[0].tool != "kwok" || results[1].tool != "fleet" || results[2].tool != "fleet-shared" {
		t.Fatalf("results %+v", results)
	}
	for _, r := range results {
		if r.running != pods || r.gone != pods {
			t.Errorf("%s: %d pods seen Running and %d gone, want %d each", r.tool, r.running, r.gone, pods)
		}
		if r.nodesReady <= 0 || r.allRunning <= 0 || r.deleteAll <= 0 || r.p50 <= 0 || r.p99 < r.p50 || r.peakRSS <= 0 || r.cpu <= 0 {
			t.Errorf("%s: implausible result %+v", r.tool, r)
		}
		if !r.cmKnown || r.apiCalls <= 0 {
			t.Errorf("%s: requests by the tool %d (controller-manager's known: %v)", r.tool, r.apiCalls, r.cmKnown)
		}
	}
	for _, fleet := range results[1:] {
		// Our nodes post each pod's status as it starts and again as it
		// stops, then delete it: requests on pods in both halves.
		if fleet.podCallsCreating <= 0 || fleet.podCalls-fleet.podCallsCreating <= 0 {
			t.Errorf("%s: requests on pods %d, of them until all Running %d; want some in each half", fleet.tool, fleet.podCalls, fleet.podCallsCreating)
		}
		if fleet.ownWasted.DeletesOfGone != 0 || fleet.ownWasted.Conflicts != 0 || fleet.ownCalls <= 0 {
			t.Errorf("%s: own calls %d, wasted %+v; want none wasted", fleet.tool, fleet.ownCalls, fleet.ownWasted)
		}
	}

	// The file holds the table: a header with both tools, then every row
	// with a label and a value for each.
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	table := string(raw)
	for _, want := range []string{"KWOK v0.7.0", "ours, as nodes", "ours, as admin", "5 nodes → all Ready with a Lease", "delete 20 pods → all gone", "peak RSS", "controller-manager meanwhile", "until all Running (creates)", "then until all gone (deletes)", "stopped being Ready", "machine load (1 min) at the start", "other processes' CPU in the run"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	lines := strings.Split(table, "\n")
	header := -1
	for i, l := range lines {
		if strings.Contains(l, "KWOK v0.7.0") && strings.Contains(l, "ours, as nodes") && strings.HasPrefix(l, " ") {
			header = i
			break
		}
	}
	if header < 0 {
		t.Fatalf("no header row naming the tools:\n%s", table)
	}
	rows := 0
	for _, l := range lines[header+1:] {
		if strings.TrimSpace(l) == "" {
			break
		}
		rows++
		// Columns are separated by three spaces or more.
		cells := regexp.MustCompile(`\s{3,}`).Split(strings.TrimSpace(l), -1)
		if len(cells) != 1+len(results) || slices.Contains(cells, "") {
			t.Errorf("row %q: want a label and a value per tool", l)
		}
	}
	if rows < 15 {
		t.Errorf("%d rows in the table, want at least 15:\n%s", rows, table)
	}
}

// TestBadFlags: a clear error before anything starts.
func TestBadFlags(t *testing.T) {
	for _, c := range []struct {
		edit func(*options)
		want string
	}{
		{func(o *options) { o.nodes = 0 }, "--nodes 0"},
		{func(o *options) { o.pods = 0 }, "--pods 0"},
		{func(o *options) { o.pods = 111 }, "more than 110 per node"},
		{func(o *options) { o.qps = 0 }, "--qps"},
		{func(o *options) { o.tools = "kwok,kubemark" }, `--tools "kwok,kubemark"`},
		{func(o *options) { o.rounds = 0 }, "--rounds 0"},
		{func(o *options) { o.maxLoad = 0 }, "--max-load 0"},
	} {
		o := options{nodes: 1, pods: 1, qps: 1, burst: 1, tools: "kwok", timeout: time.Minute, rounds: 1, maxLoad: 1}
		c.edit(&o)
		if _, err := run(context.Background(), o, &testenv.SyncBuffer{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

// TestTableNamesFailures: a tool that failed has no column and is named
// under the table; the others keep theirs.
func TestTableNamesFailures(t *testing.T) {
	o := options{nodes: 3, pods: 6, qps: 200, burst: 200, kubeconfig: "k"}
	ok := &result{tool: "kwok", ownCalls: -1, p50: time.Second, p99: 2 * time.Second}
	table := formatTable(o, &env{version: "v1.36.3"}, []*result{ok}, []string{"fleet: delete: timed out after 10m0s: 2561 of 6 pods gone"})
	if !strings.Contains(table, "KWOK v0.7.0") || strings.Contains(table, "   ours, as nodes") {
		t.Errorf("want KWOK's column only:\n%s", table)
	}
	if !strings.Contains(table, "FAILED (no column): fleet: delete: timed out") {
		t.Errorf("the failure is not named:\n%s", table)
	}
	if err := failure([]string{"fleet: x"}); err == nil || !strings.Contains(err.Error(), "1 of the tools failed: fleet: x") {
		t.Errorf("failure: %v", err)
	}
}
