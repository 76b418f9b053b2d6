package main

import (
	"fmt"
	"strings"
	"time"

	"kubelet-labs/hack/internal/benchkit"
)

// The table's measures, by key: a result's v holds each.
const (
	keyNodeReady      = "nodeReady"
	keyListSandbox    = "listSandbox"
	keyListContainers = "listContainers"
	keyIdleCPU        = "idleCPU"
	keyRunP50         = "runP50"
	keyRunP99         = "runP99"
	keyReadyP50       = "readyP50"
	keyReadyP99       = "readyP99"
	keyAllUp          = "allUp"
	keyGoneP50        = "goneP50"
	keyAllGone        = "allGone"
	keyAPICreate      = "apiCreate"
	keyAPIDelete      = "apiDelete"
	keyPodsCreate     = "podsCreate"
	keyPodsDelete     = "podsDelete"
	keyEvents         = "events"
	keyCRICreate      = "criCreate"
	keyCRIDelete      = "criDelete"
	keyRunSandbox     = "runSandbox"
	keyRSS            = "rss"
	keyRSSAnon        = "rss-anon"
	keyRSSFile        = "rss-file"
	keyCPUPods        = "cpuPods"
	keyCPUAll         = "cpuAll"
	keyCPCPU          = "cpCPU"
	keyLoadMean       = "loadMean"
	keyLoadPeak       = "loadPeak"
	keyOthersCPU      = "othersCPU"
)

// row is one line of the table: a label and how its value is written.
type row struct {
	key, label string
	format     func(float64) string
}

func msec(v float64) string { return fmt.Sprintf("%.0f ms", v*1000) }
func sec(v float64) string  { return fmt.Sprintf("%.1f s", v) }
func f1(v float64) string   { return fmt.Sprintf("%.1f", v) }
func f2(v float64) string   { return fmt.Sprintf("%.2f", v) }
func mib(v float64) string  { return fmt.Sprintf("%.0f MiB", v) }

// bare is format without its unit, for the brackets: "643 ms (384–780)".
func bare(format func(float64) string) func(float64) string {
	return func(v float64) string {
		s := format(v)
		for _, unit := range []string{" ms", " s", " MiB"} {
			s = strings.TrimSuffix(s, unit)
		}
		return s
	}
}

func rows(pods int) []row {
	return []row{
		{keyNodeReady, "start → node Ready", sec},
		{keyRunP50, "pod create → Running, p50", msec},
		{keyRunP99, "pod create → Running, p99", msec},
		{keyReadyP50, "pod create → Ready, p50 (pods with a readiness probe)", msec},
		{keyReadyP99, "pod create → Ready, p99 (pods with a readiness probe)", msec},
		{keyAllUp, fmt.Sprintf("%d pods → all Running and Ready", pods), sec},
		{keyGoneP50, "pod delete → gone, p50", msec},
		{keyAllGone, fmt.Sprintf("delete %d pods → all gone", pods), sec},
		{keyAPICreate, "API requests per pod, create (until all Running and Ready)", f1},
		{keyAPIDelete, "API requests per pod, delete (until all gone)", f1},
		{keyPodsCreate, "  of them on pods, create", f1},
		{keyPodsDelete, "  of them on pods, delete", f1},
		{keyEvents, "  of them on events, both", f1},
		{keyCRICreate, "CRI calls per pod, create", f1},
		{keyCRIDelete, "CRI calls per pod, delete", f1},
		{keyRunSandbox, "  of them RunPodSandbox", f2},
		{keyListSandbox, "ListPodSandbox per second, idle (relists)", f2},
		{keyListContainers, "ListContainers per second, idle", f2},
		{keyIdleCPU, "CPU, idle (cores)", f2},
		{keyRSS, "peak RSS", mib},
		{keyRSSAnon, "  heap and stacks (RssAnon), at its highest", mib},
		{keyRSSFile, "  the program's own pages (RssFile), at its highest", mib},
		{keyCPUPods, "CPU seconds, first create → all gone", f1},
		{keyCPUAll, "CPU seconds, start → all gone", f1},
		{keyCPCPU, "kube-apiserver + etcd CPU seconds in the run", f1},
		{keyLoadMean, "machine load in the run: mean", f2},
		{keyLoadPeak, "machine load in the run: peak", f2},
		{keyOthersCPU, "other processes' CPU seconds in the run", f1},
	}
}

// column is one kubelet on one runtime: its rounds.
type column struct {
	kubelet, runtime string
	runs             []*result
}

func (c column) title() string {
	k := "real kubelet"
	if c.kubelet == kubeletOurs {
		k = "ours"
	}
	rt := "containerd " + flavour
	if c.runtime == runtimeMock {
		rt = "mock CRI"
	}
	return k + ", " + rt
}

// median is a measure's median over the column's rounds.
func (c column) median(key string) float64 {
	v := make([]float64, len(c.runs))
	for i, r := range c.runs {
		v[i] = r.v[key]
	}
	return benchkit.MedianValue(v)
}

// columns groups results by runtime (in --runtimes order), then kubelet
// (in --kubelets order).
func columns(o options, results []*result) []column {
	var out []column
	for _, rt := range o.list(o.runtimes) {
		for _, k := range o.list(o.kubelets) {
			c := column{kubelet: k, runtime: rt}
			for _, r := range results {
				if r.kubelet == k && r.runtime == rt {
					c.runs = append(c.runs, r)
				}
			}
			if len(c.runs) > 0 {
				out = append(out, c)
			}
		}
	}
	return out
}

// formatTable is the benchmark's one table: a row per measure, a column
// per kubelet and runtime, each cell the median of the rounds with the
// lowest and highest; then ours against the real kubelet on each runtime,
// against the goals of issue 41; then how each number was measured.
func formatTable(o options, e *env, results []*result, failed []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "kubeletbench, %s: %d pods per run (busybox, a readiness probe on every other one) on one node; a private control plane (kube-apiserver %s, kube-controller-manager); %s\n",
		time.Now().Format("2006-01-02 15:04"), o.pods, e.version, benchkit.Machine())
	fmt.Fprintf(&b, "real kubelet = lab 01 (kubelet v1.36.3, cgroupfs, failCgroupV1 false); ours = lab 18. The benchmark's client: QPS %g burst %d. Idle spell %s.\n", o.qps, o.burst, o.idle)
	cols := columns(o, results)
	rounds := 0
	for _, c := range cols {
		rounds = max(rounds, len(c.runs))
	}
	if rounds > 1 {
		fmt.Fprintf(&b, "%d rounds, the kubelets in another order each; a cell is the median of the rounds, in brackets the lowest and highest\n", rounds)
	}
	var busy []string
	for _, r := range results {
		if r.busy {
			busy = append(busy, fmt.Sprintf("%s on %s in round %d started at load %.2f", r.kubelet, r.runtime, r.round+1, r.loadBefore))
		}
	}
	warning := o.BusyWarning(busy)
	b.WriteString(warning)
	b.WriteString("\n")

	table := [][]string{{""}}
	for _, c := range cols {
		table[0] = append(table[0], c.title())
	}
	loadRow := []string{"machine load (1 min) at the start"}
	for _, c := range cols {
		v := make([]float64, len(c.runs))
		anyBusy := false
		for i, r := range c.runs {
			v[i], anyBusy = r.loadBefore, anyBusy || r.busy
		}
		cell := benchkit.LoadCell(benchkit.MedianValue(v), anyBusy) + benchkit.Spread(v, benchkit.SpreadValue)
		loadRow = append(loadRow, cell)
	}
	for _, rw := range rows(o.pods) {
		line := []string{rw.label}
		for _, c := range cols {
			v := make([]float64, len(c.runs))
			for i, r := range c.runs {
				v[i] = r.v[rw.key]
			}
			line = append(line, rw.format(c.median(rw.key))+benchkit.Spread(v, bare(rw.format)))
		}
		table = append(table, line)
	}
	table = append(table, loadRow)
	if len(cols) == 0 {
		table = table[:1]
	}
	benchkit.WriteAligned(&b, table)

	// Ours against the real kubelet, runtime by runtime.
	var goals [][]string
	for _, rt := range o.list(o.runtimes) {
		var real, ours *column
		for i := range cols {
			if cols[i].runtime == rt && cols[i].kubelet == kubeletReal {
				real = &cols[i]
			}
			if cols[i].runtime == rt && cols[i].kubelet == kubeletOurs {
				ours = &cols[i]
			}
		}
		if real == nil || ours == nil {
			continue
		}
		ratio := func(label, key string, goal float64) {
			rv, ov := real.median(key), ours.median(key)
			cell := "-"
			verdict := ""
			if rv > 0 {
				cell = fmt.Sprintf("%.2f×", ov/rv)
				verdict = "met"
				if ov/rv > goal {
					verdict = "MISSED"
				}
			}
			goals = append(goals, []string{rt, label, cell, fmt.Sprintf("≤ %.1f×", goal), verdict})
		}
		ratio("create → Running, p50", keyRunP50, 1)
		ratio("delete → all gone", keyAllGone, 1)
		ratio("API requests per pod, create", keyAPICreate, 1)
		ratio("API requests per pod, delete", keyAPIDelete, 1)
		ratio("peak RSS", keyRSS, 0.5)
	}
	if len(goals) > 0 {
		b.WriteString("\nours ÷ real kubelet, medians (issue 41's goals):\n")
		benchkit.WriteAligned(&b, append([][]string{{"runtime", "measure", "ours ÷ real", "goal", ""}}, goals...))
	}
	for _, f := range failed {
		fmt.Fprintf(&b, "\nFAILED (no cell): %s\n", f)
	}
	if warning != "" {
		b.WriteString("\n" + warning)
	}
	b.WriteString(`
How: each kubelet runs as a child process (peak RSS = VmHWM, CPU = utime+stime from /proc;
RssAnon and RssFile, the highest of each sampled every 250 ms from /proc/PID/status), one at a
time, on a node of its own named for the run; the pods are bound by spec.nodeName and
created, then deleted (default grace, one DELETE each), by the benchmark's client. Latency =
request sent → first watch event with phase Running / condition Ready / the pod gone. API
requests: the apiserver's apiserver_request_total, before the first create, when all pods are
Running and Ready, and when all are gone, less the benchmark's own requests and the
controller-manager's (its rest_client_requests_total); heartbeats in those spells are included.
CRI calls: counted by method at a gRPC proxy between the kubelet and the runtime, the same for
both kubelets and both runtimes. Idle: the spell after the node is Ready, before any pod. Load:
/proc/loadavg when the run started (after waiting up to --quiet-wait for it to fall under
--max-load per core; "busy" if it did not); other processes' CPU = the machine's CPU time in the
run (/proc/stat) less the kubelet's, the control plane's and the benchmark's own.
`)
	return b.String()
}
