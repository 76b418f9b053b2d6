package main

import (
	"context"

	"kubelet-labs/hack/internal/benchkit"
)

// A comparison of two tools on one machine measures the machine as much as
// the tools: under other work KWOK's four pod workers starve and the order
// of the two flips (issue 23). So the benchmark measures how busy the
// machine was before and during each tool, waits for it to be quiet before
// each one, and refuses to start — unless told otherwise, and then says so
// in the table — on a machine that is busy already. The measuring itself
// is benchkit's, and its flags (benchkit.LoadFlags).

// loadAvg1 reads the 1-minute load; a test replaces it.
var loadAvg1 = procLoadAvg1

// checkQuiet refuses a busy machine before anything starts, unless
// --allow-busy.
func checkQuiet(o options) error { return o.CheckQuiet(loadAvg1, "KWOK's pod workers") }

// waitQuiet waits, up to --quiet-wait, for the 1-minute load to fall under
// the threshold — the tool before leaves it high for a minute or two — and
// returns the load it starts at; busy is true if it never fell.
func waitQuiet(ctx context.Context, o options, logf func(string, ...any)) (load float64, busy bool) {
	return o.WaitQuiet(ctx, loadAvg1, logf)
}

// watchLoad samples the load during a tool's run (benchkit.LoadWatch).
func watchLoad() *benchkit.LoadWatch { return benchkit.WatchLoad(loadAvg1) }
