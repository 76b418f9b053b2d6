package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"kubelet-labs/hack/internal/benchkit"
	"kubelet-labs/hack/internal/benchkit/benchtest"
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
		RoundFlags: benchkit.RoundFlags{Rounds: 1}, LoadFlags: benchkit.LoadFlags{MaxLoad: 1, AllowBusy: true}}
	results := benchtest.Run(t, 8*time.Minute, func(ctx context.Context, w io.Writer) ([]*result, error) { return run(ctx, o, w) })
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
	rows, ok := benchtest.Rows(table, func(l string) bool {
		return strings.Contains(l, "KWOK v0.7.0") && strings.Contains(l, "ours, as nodes") && strings.HasPrefix(l, " ")
	})
	if !ok {
		t.Fatalf("no header row naming the tools:\n%s", table)
	}
	for _, cells := range rows {
		if len(cells) != 1+len(results) || slices.Contains(cells, "") {
			t.Errorf("row %q: want a label and a value per tool", cells)
		}
	}
	if len(rows) < 15 {
		t.Errorf("%d rows in the table, want at least 15:\n%s", len(rows), table)
	}
}

// TestBadFlags: a clear error before anything starts.
func TestBadFlags(t *testing.T) {
	valid := options{nodes: 1, pods: 1, qps: 1, burst: 1, tools: "kwok", timeout: time.Minute, RoundFlags: benchkit.RoundFlags{Rounds: 1}, LoadFlags: benchkit.LoadFlags{MaxLoad: 1}}
	benchtest.CheckRefused(t, valid, run, []benchtest.Refused[options]{
		{Edit: func(o *options) { o.nodes = 0 }, Want: "--nodes 0"},
		{Edit: func(o *options) { o.pods = 0 }, Want: "--pods 0"},
		{Edit: func(o *options) { o.pods = 111 }, Want: "more than 110 per node"},
		{Edit: func(o *options) { o.qps = 0 }, Want: "--qps"},
		{Edit: func(o *options) { o.tools = "kwok,kubemark" }, Want: `--tools "kwok,kubemark"`},
		{Edit: func(o *options) { o.Rounds = 0 }, Want: "--rounds 0"},
		{Edit: func(o *options) { o.MaxLoad = 0 }, Want: "--max-load 0"},
	})
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
