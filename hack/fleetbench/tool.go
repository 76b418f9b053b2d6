package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"kubelet-labs/hack/internal/benchkit"
	"kubelet-labs/mycore/fleet"
	"kubelet-labs/mycore/node"
)

// result is one tool's row of the table.
type result struct {
	tool       string
	nodesReady time.Duration // first node create (KWOK) / process start (fleet) → all Ready with a Lease
	p50, p99   time.Duration // create → Running
	allRunning time.Duration // first create → last pod Running
	perSecond  float64
	deleteAll  time.Duration // first delete → last pod gone
	// From the apiserver's metrics: every request in the run but the
	// benchmark's own and (with cmKnown) the controller-manager's.
	apiCalls int64
	// Of them, those on pods (pods, pods/status…) and on events: what
	// each pod costs, without the heartbeats, which grow with the run's
	// length, not with the pods.
	podCalls, eventCalls int64
	// Of the requests on pods, those made until every pod was Running
	// (the rest came while they were deleted): issue 23 asks for requests
	// per pod for create and for delete.
	podCallsCreating int64
	wasted           fleet.Wasted
	// The controller-manager's own requests during the run, from its
	// metrics (cmKnown: the control plane is ours to read).
	cmKnown  bool
	cmCalls  int64
	cmWasted fleet.Wasted
	// Pods seen Running, and seen gone after their delete.
	running, gone int
	// Times a node stopped being Ready after all were, and how many nodes.
	lostReady, nodesLostReady int
	// Requests refused (403, 429) or failed (5xx), by the apiserver's count
	// (tool only with cmKnown); the fleet's own count adds its client-side
	// timeouts (no answer).
	refused, ownRefused, ownTimeouts int64
	// The fleet's own count of its requests (-1 for KWOK: not available).
	ownCalls  int64
	ownWasted fleet.Wasted
	peakRSS   int64
	cpu       time.Duration
	wall      time.Duration
	cpCPU     time.Duration // kube-apiserver + etcd during the run
	// How busy the machine was (load.go): the 1-minute load when the tool
	// started, its mean and peak during the run, whether it started above
	// the threshold, and the CPU time of every other process in the run
	// (the machine's, less the tool's, the control plane's and the
	// benchmark's own).
	round                  int
	loadBefore             float64
	loadMean, loadPeak     float64
	busy                   bool
	othersCPU, machineBusy time.Duration
}

// runTool is one tool's whole run: start it, nodes, pods, delete, stop,
// clean up.
func (e *env) runTool(ctx context.Context, tool string, logf func(string, ...any)) (_ *result, err error) {
	o := e.o
	r := &result{tool: tool, ownCalls: -1}
	ns := "bench-" + tool
	var names []string
	var selector string
	switch tool {
	case "kwok":
		for i := range o.nodes {
			names = append(names, fmt.Sprintf("kwok-%04d", i))
		}
		selector = benchLabel + "=kwok"
	case "fleet", "fleet-shared":
		for i := range o.nodes {
			names = append(names, fleet.NodeName(fleet.DefaultPrefix, i))
		}
		selector = node.LabLabel + "=18-mykubelet"
	}
	d := e.driver
	if err := d.EnsureNamespace(ctx, ns); err != nil {
		return nil, err
	}
	// A clean slate: what an earlier, interrupted run may have left.
	d.cleanupNodes(ctx, selector, names)
	// If this tool fails, clean up after it (once it is stopped: deferred
	// first, run last) so that the next tool starts on an empty cluster.
	defer func() {
		if err != nil && ctx.Err() == nil {
			logf("%s: cleaning up its nodes and pods", tool)
			d.cleanup(ctx, selector, ns, names)
		}
	}()

	logf("%s: %d nodes, %d pods", tool, o.nodes, o.pods)
	mine0 := d.Calls.Counts()
	api0, err := requestTotals(ctx, e.admin)
	if err != nil {
		return nil, err
	}
	cm0, err := e.controllerManagerTotals(ctx)
	if err != nil {
		return nil, err
	}
	cp0, cm0CPU := benchkit.ControlPlaneCPU(e.cp)
	start := time.Now()
	lw := watchLoad()
	defer lw.End()

	// Watch the nodes from before they exist to the end of the pods.
	nodes := d.watchNodes(ctx, names, selector)
	defer nodes.stop()
	var c *child
	var t0 time.Time
	statsFile := filepath.Join(e.dir, "fleet-stats.json")
	switch tool {
	case "kwok":
		home, err := os.MkdirTemp(e.dir, "kwok-home-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(home)
		// KWOK manages the nodes with our label; with a lease duration it
		// renews a Lease per node every 10 s, as the kubelet (and the fleet).
		c, err = startChild("kwok", filepath.Join(e.dir, "kwok.log"), []string{"HOME=" + home}, e.kwokBin,
			"--kubeconfig="+e.kubeconfig, "--manage-nodes-with-label-selector="+selector,
			"--node-lease-duration-seconds=40")
		if err != nil {
			return nil, err
		}
		t0 = time.Now()
		if err := d.createNodes(ctx, names); err != nil {
			c.Stop(10 * time.Second)
			return nil, fmt.Errorf("create KWOK's nodes: %w", err)
		}
	case "fleet", "fleet-shared":
		os.Remove(statsFile)
		args := append([]string{"--kubeconfig=" + e.kubeconfig, fmt.Sprintf("--nodes=%d", o.nodes),
			fmt.Sprintf("--kube-api-qps=%g", o.fleetQPS), "--stats-file=" + statsFile}, strings.Fields(o.fleetFlags)...)
		if tool == "fleet-shared" {
			// KWOK's way: every request as the admin (exempt from
			// priority and fairness, no per-node authorization).
			args = append(args, "--shared-identity")
		}
		c, err = startChild(tool, filepath.Join(e.dir, tool+".log"), nil, e.fleetBin, args...)
		if err != nil {
			return nil, err
		}
		t0 = start
	}
	defer c.Stop(30 * time.Second)

	if err := nodes.waitReady(ctx, o.timeout, c.Exited, logf); err != nil {
		return nil, fmt.Errorf("nodes: %w", err)
	}
	r.nodesReady = time.Since(t0)
	since := "the process started"
	if tool == "kwok" {
		since = "the first node create"
	}
	logf("%s: %d nodes Ready with a Lease %.1fs after %s", tool, o.nodes, r.nodesReady.Seconds(), since)

	// The counters again when every pod is Running, before the deletes:
	// requests on pods until then are the creates' cost, after it the
	// deletes'. (Heartbeats are left out of both: they grow with time.)
	var apiMid map[fleet.Call]int64
	var mineMid []fleet.CallCount
	var midErr error
	atAllRunning := func() {
		mineMid = d.Calls.Counts()
		apiMid, midErr = requestTotals(ctx, e.admin)
	}
	pods, err := d.runPods(ctx, ns, names, o.pods, o.timeout, c.Exited, atAllRunning, logf)
	if err != nil {
		return nil, err
	}
	if midErr != nil {
		return nil, midErr
	}
	r.podCallsCreating = onResource(minus(apiMid, api0, delta(mineMid, mine0)), "pods")
	r.running, _, r.gone = pods.Counts()
	lat, _, _ := pods.Latencies()
	r.p50, r.p99 = benchkit.Percentile(lat, 0.50), benchkit.Percentile(lat, 0.99)
	r.allRunning = pods.LastRunning().Sub(pods.CreateStart)
	r.perSecond = float64(o.pods) / r.allRunning.Seconds()
	r.deleteAll = pods.AllGone.Sub(pods.DeleteStart)
	r.lostReady, r.nodesLostReady = nodes.lost()
	nodes.stop()
	logf("%s: %d pods Running %.1fs after the first create (p50 %s, p99 %s); all gone %.1fs after the first delete",
		tool, o.pods, r.allRunning.Seconds(), ms(r.p50), ms(r.p99), r.deleteAll.Seconds())

	r.peakRSS, r.cpu = c.Usage()
	r.wall = time.Since(start)
	c.Stop(30 * time.Second)
	cp1, cm1CPU := benchkit.ControlPlaneCPU(e.cp)
	r.cpCPU = cp1 - cp0
	var self time.Duration
	r.loadMean, r.loadPeak, r.machineBusy, self = lw.End()
	r.othersCPU = max(0, r.machineBusy-r.cpu-r.cpCPU-(cm1CPU-cm0CPU)-self)

	api1, err := requestTotals(ctx, e.admin)
	if err != nil {
		return nil, err
	}
	cm1, err := e.controllerManagerTotals(ctx)
	if err != nil {
		return nil, err
	}
	others := minus(api1, api0, delta(d.Calls.Counts(), mine0))
	r.apiCalls, r.wasted, r.refused = fleet.Total(others), fleet.WastedOf(others), refusedOf(others)
	r.podCalls, r.eventCalls = onResource(others, "pods"), onResource(others, "events")
	for _, c := range others {
		if c.Code == 404 || c.Code == 409 || c.Code == 429 || c.Code >= 500 {
			logf("%s:   apiserver answered %s (anyone's but the benchmark's)", tool, c)
		}
	}
	writeCalls(filepath.Join(e.dir, tool+"-requests.txt"), others)
	if cm1 != nil {
		cm := minus(cm1, cm0, nil)
		r.cmKnown, r.cmCalls, r.cmWasted = true, fleet.Total(cm), fleet.WastedOf(cm)
		// The two counters are read a moment apart: never below zero.
		r.apiCalls = max(0, r.apiCalls-r.cmCalls)
		r.podCalls = max(0, r.podCalls-onResource(cm, "pods"))
		r.eventCalls = max(0, r.eventCalls-onResource(cm, "events"))
		r.wasted.DeletesOfGone = max(0, r.wasted.DeletesOfGone-r.cmWasted.DeletesOfGone)
		r.wasted.Conflicts = max(0, r.wasted.Conflicts-r.cmWasted.Conflicts)
		r.refused = max(0, r.refused-refusedOf(cm))
		for _, c := range cm {
			if c.Code == 404 || c.Code == 409 || c.Code == 429 || c.Code >= 500 {
				logf("%s:   of them the controller-manager's: %s %d  %d", tool, c.Verb, c.Code, c.Count)
			}
		}
	}
	if tool != "kwok" {
		var st struct {
			Total  int64             `json:"total"`
			Wasted fleet.Wasted      `json:"wasted"`
			Calls  []fleet.CallCount `json:"calls"`
		}
		b, err := os.ReadFile(statsFile)
		if err == nil {
			err = json.Unmarshal(b, &st)
		}
		if err != nil {
			return nil, fmt.Errorf("the fleet's stats file: %w", err)
		}
		r.ownCalls, r.ownWasted, r.ownRefused = st.Total, st.Wasted, refusedOf(st.Calls)
		for _, c := range st.Calls {
			if c.Code == 0 {
				r.ownTimeouts += c.Count
			}
		}
	}

	logf("%s: cleaning up its nodes and pods", tool)
	d.cleanup(ctx, selector, ns, names)
	return r, nil
}

// writeCalls keeps the apiserver's count of a tool's requests, by verb,
// resource and code, for a closer look than the table's (best effort).
func writeCalls(path string, calls []fleet.CallCount) {
	sort.Slice(calls, func(i, j int) bool { return calls[i].Count > calls[j].Count })
	var b strings.Builder
	b.WriteString("# requests in the run, counted by the apiserver, minus the benchmark's own (the controller-manager's included)\n")
	for _, c := range calls {
		b.WriteString(c.String() + "\n")
	}
	_ = os.WriteFile(path, []byte(b.String()), 0o644)
}

// refusedOf counts the requests refused (403 Forbidden, 429 Too Many
// Requests) or failed on the server (5xx) among counts.
func refusedOf(counts []fleet.CallCount) int64 {
	var n int64
	for _, c := range counts {
		if c.Code == 403 || c.Code == 429 || c.Code >= 500 {
			n += c.Count
		}
	}
	return n
}

func ms(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}
