package main

import (
	"fmt"
	"strings"
	"time"

	"kubelet-labs/hack/internal/benchkit"
)

// formatTable is the one table the benchmark prints: a row per measure,
// a column per tool, then how each was measured.
func formatTable(o options, e *env, results []*result, failed []string) string {
	var b strings.Builder
	cluster := "a private control plane (etcd, kube-apiserver " + e.version + ", kube-controller-manager)"
	if e.cp == nil {
		cluster = "the cluster of " + o.kubeconfig + " (kube-apiserver " + e.version + ")"
	}
	fleetLimit := "none"
	if o.fleetQPS > 0 {
		fleetLimit = fmt.Sprintf("QPS %g", o.fleetQPS)
	}
	fmt.Fprintf(&b, "lab 18 benchmark, %s: %d nodes and %d pods per tool, one after the other on %s; %s\n",
		time.Now().Format("2006-01-02 15:04"), o.nodes, o.pods, cluster, machine())
	fmt.Fprintf(&b, "client limits: the benchmark's own client (creates, deletes) QPS %g burst %d; KWOK v0.7.0 none (hard-coded); fleet mode %s\n", o.qps, o.burst, fleetLimit)
	fmt.Fprintf(&b, "identity: KWOK and \"ours, as admin\" act as the admin (exempt from priority and fairness); \"ours, as nodes\" as system:node:NAME (Node authorizer, queued as kubelets)\n")
	if o.fleetFlags != "" {
		fmt.Fprintf(&b, "fleet flags: %s\n", o.fleetFlags)
	}
	groups := byTool(results)
	rounds := 1
	for _, g := range groups {
		rounds = max(rounds, len(g.runs))
	}
	if rounds > 1 {
		fmt.Fprintf(&b, "%d rounds, each in another order (round 1: %s, …); a cell is the median of the rounds, in brackets the lowest and highest\n",
			rounds, o.tools)
	}
	var busy []string
	for _, r := range results {
		if r.busy {
			busy = append(busy, fmt.Sprintf("%s in round %d started at load %.2f", r.tool, r.round+1, r.loadBefore))
		}
	}
	warning := o.BusyWarning(busy)
	b.WriteString(warning)
	b.WriteString("\n")

	name := map[string]string{"kwok": "KWOK v0.7.0", "fleet": "ours, as nodes", "fleet-shared": "ours, as admin"}
	rows := [][]string{{""}}
	med := make([]*result, len(groups))
	for i, g := range groups {
		rows[0] = append(rows[0], name[g.tool])
		med[i] = medianOf(g.runs)
	}
	// add is a row of the medians; with value and format, each cell also
	// gets the spread of the rounds.
	add := func(label string, f func(*result) string, spreadOf ...func(*result) float64) {
		row := []string{label}
		for i, m := range med {
			cell := f(m)
			if len(spreadOf) > 0 {
				cell += spread(groups[i].runs, spreadOf[0], spreadValue)
			}
			row = append(row, cell)
		}
		rows = append(rows, row)
	}
	sec := func(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
	secs := func(f func(*result) time.Duration) func(*result) float64 {
		return func(r *result) float64 { return f(r).Seconds() }
	}
	add(fmt.Sprintf("%d nodes → all Ready with a Lease", o.nodes), func(r *result) string { return sec(r.nodesReady) }, secs(func(r *result) time.Duration { return r.nodesReady }))
	add("pod create → Running, p50", func(r *result) string { return ms(r.p50) }, secs(func(r *result) time.Duration { return r.p50 }))
	add("pod create → Running, p99", func(r *result) string { return ms(r.p99) }, secs(func(r *result) time.Duration { return r.p99 }))
	add(fmt.Sprintf("%d pods → all Running", o.pods), func(r *result) string { return sec(r.allRunning) }, secs(func(r *result) time.Duration { return r.allRunning }))
	add("pods Running per second", func(r *result) string { return fmt.Sprintf("%.0f", r.perSecond) })
	add(fmt.Sprintf("delete %d pods → all gone", o.pods), func(r *result) string { return sec(r.deleteAll) }, secs(func(r *result) time.Duration { return r.deleteAll }))
	// With the controller-manager's own count, its requests are taken
	// out of the apiserver's and shown on their own row.
	by := "the tool and the controller-manager"
	if len(results) > 0 && results[0].cmKnown {
		by = "the tool"
	}
	add("wasted: deletes of pods already gone", func(r *result) string { return own(r.wasted.DeletesOfGone, r.ownCalls >= 0, r.ownWasted.DeletesOfGone) })
	add("wasted: conflicts (409)", func(r *result) string { return own(r.wasted.Conflicts, r.ownCalls >= 0, r.ownWasted.Conflicts) })
	add("refused or failed: 403, 429, 5xx", func(r *result) string { return own(r.refused, r.ownCalls >= 0, r.ownRefused) })
	add("timed out in the tool (no answer)", func(r *result) string {
		if r.ownCalls < 0 {
			return "not counted"
		}
		return fmt.Sprint(r.ownTimeouts)
	})
	add("API requests by "+by, func(r *result) string { return own(r.apiCalls, r.ownCalls >= 0, r.ownCalls) })
	add("API requests per pod (create and delete)", func(r *result) string { return fmt.Sprintf("%.1f", float64(r.apiCalls)/float64(o.pods)) },
		func(r *result) float64 { return float64(r.apiCalls) / float64(o.pods) })
	perPod := func(n int64) float64 { return float64(n) / float64(o.pods) }
	add("  of them on pods, per pod", func(r *result) string { return fmt.Sprintf("%.1f", perPod(r.podCalls)) },
		func(r *result) float64 { return perPod(r.podCalls) })
	add("    until all Running (creates)", func(r *result) string { return fmt.Sprintf("%.1f", perPod(r.podCallsCreating)) },
		func(r *result) float64 { return perPod(r.podCallsCreating) })
	add("    then until all gone (deletes)", func(r *result) string { return fmt.Sprintf("%.1f", perPod(r.podCalls-r.podCallsCreating)) },
		func(r *result) float64 { return perPod(r.podCalls - r.podCallsCreating) })
	add("  of them on events, per pod", func(r *result) string { return fmt.Sprintf("%.1f", perPod(r.eventCalls)) },
		func(r *result) float64 { return perPod(r.eventCalls) })
	if by == "the tool" {
		add("controller-manager meanwhile: requests (409s)", func(r *result) string {
			return fmt.Sprintf("%d (%d)", r.cmCalls, r.cmWasted.Conflicts)
		})
	}
	add("nodes that stopped being Ready (times)", func(r *result) string {
		return fmt.Sprintf("%d (%d)", r.nodesLostReady, r.lostReady)
	})
	add("peak RSS", func(r *result) string { return fmt.Sprintf("%d MiB", r.peakRSS>>20) }, func(r *result) float64 { return float64(r.peakRSS >> 20) })
	add("CPU time (avg cores over its run)", func(r *result) string {
		if r.wall <= 0 {
			return fmt.Sprintf("%.1f s", r.cpu.Seconds())
		}
		return fmt.Sprintf("%.1f s (%.2f)", r.cpu.Seconds(), r.cpu.Seconds()/r.wall.Seconds())
	})
	if e.cp != nil {
		add("kube-apiserver + etcd CPU in the run", func(r *result) string { return fmt.Sprintf("%.0f s", r.cpCPU.Seconds()) })
	}
	add("machine load (1 min) at the start", func(r *result) string { return benchkit.LoadCell(r.loadBefore, r.busy) }, func(r *result) float64 { return r.loadBefore })
	add("machine load in the run: mean / peak", func(r *result) string { return fmt.Sprintf("%.2f / %.2f", r.loadMean, r.loadPeak) })
	add("other processes' CPU in the run", func(r *result) string { return fmt.Sprintf("%.0f s", r.othersCPU.Seconds()) }, secs(func(r *result) time.Duration { return r.othersCPU }))
	if len(results) == 0 {
		rows = rows[:1]
	}
	benchkit.WriteAligned(&b, rows)
	for _, f := range failed {
		fmt.Fprintf(&b, "\nFAILED (no column): %s\n", f)
	}
	if warning != "" {
		b.WriteString("\n" + warning)
	}
	b.WriteString(`
How: each tool runs as a child process (peak RSS = VmHWM, CPU = utime+stime from /proc).
KWOK's nodes are created by the benchmark (KWOK makes them Ready); the fleet registers its own.
Pods are bound by spec.nodeName, round-robin; latency = create request sent → first watch event
with phase Running. Deleting = one DELETE per pod, default grace (kubectl delete pods --all).
Requests are counted by the apiserver (apiserver_request_total, before/after, minus the
benchmark's own and the controller-manager's, which it counts itself: rest_client_requests_total);
in parentheses, the fleet's own count of its requests. "On pods": the tool's requests on pods and
their subresources (reads, status posts, final deletes; the benchmark's creates and deletes are
not the tool's); "on events": its event writes (a kubelet's Pulled, Created, Started, Killing…;
KWOK's default stages write none). The rest are heartbeats (Leases, node status). A node "stopped being Ready" when its
Ready condition left True after all were Ready (heartbeats late: the node lifecycle controller
marks it Unknown), until the last pod was gone. Load: /proc/loadavg's 1-minute average when the
tool started (after waiting up to --quiet-wait for it to fall under --max-load per core; "busy" if
it did not), and sampled every 5 s in the run; other processes' CPU = the machine's CPU time in the
run (/proc/stat) less the tool's, the control plane's and the benchmark's own.
`)
	return b.String()
}

// own is "n", or "n (mine)" when the tool counted its own.
func own(n int64, has bool, mine int64) string {
	if !has {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%d (%d)", n, mine)
}
