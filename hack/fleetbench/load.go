package main

import (
	"context"
	"fmt"
	"runtime"

	"kubelet-labs/hack/internal/benchkit"
)

// A comparison of two tools on one machine measures the machine as much as
// the tools: under other work KWOK's four pod workers starve and the order
// of the two flips (issue 23). So the benchmark measures how busy the
// machine was before and during each tool, waits for it to be quiet before
// each one, and refuses to start — unless told otherwise, and then says so
// in the table — on a machine that is busy already. The measuring itself
// is benchkit's.

// loadAvg1 reads the 1-minute load; a test replaces it.
var loadAvg1 = procLoadAvg1

// busyThreshold is the 1-minute load above which the machine is busy:
// maxLoad per core.
func (o options) busyThreshold() float64 { return benchkit.BusyThreshold(o.maxLoad) }

// checkQuiet refuses a busy machine before anything starts, unless
// --allow-busy.
func checkQuiet(o options) error {
	load, err := loadAvg1()
	if err != nil || o.allowBusy {
		return nil // no /proc/loadavg: nothing to refuse on; the table says "?"
	}
	if load > o.busyThreshold() {
		return fmt.Errorf("the machine is busy: load %.2f on %d cores, above --max-load %g per core; a comparison now measures the other work (KWOK's pod workers starve first). Wait until it is quiet, or pass --allow-busy (the table then says the run was busy)",
			load, runtime.NumCPU(), o.maxLoad)
	}
	return nil
}

// waitQuiet waits, up to o.quietWait, for the 1-minute load to fall under
// the threshold — the tool before leaves it high for a minute or two — and
// returns the load it starts at; busy is true if it never fell.
func waitQuiet(ctx context.Context, o options, logf func(string, ...any)) (load float64, busy bool) {
	return benchkit.WaitQuiet(ctx, loadAvg1, o.busyThreshold(), o.allowBusy, o.quietWait, logf)
}

// watchLoad samples the load during a tool's run (benchkit.LoadWatch).
func watchLoad() *benchkit.LoadWatch { return benchkit.WatchLoad(loadAvg1) }
