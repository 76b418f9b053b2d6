package main

import (
	"slices"
	"time"

	"kubelet-labs/hack/internal/benchkit"
)

// toolRuns is one tool's successful rounds, in the order run.
type toolRuns struct {
	tool string
	runs []*result
}

// byTool groups the results per tool, tools in the order of their first run.
func byTool(results []*result) []toolRuns {
	var out []toolRuns
	for _, r := range results {
		i := slices.IndexFunc(out, func(t toolRuns) bool { return t.tool == r.tool })
		if i < 0 {
			out = append(out, toolRuns{tool: r.tool})
			i = len(out) - 1
		}
		out[i].runs = append(out[i].runs, r)
	}
	return out
}

// medianOf is a result whose every number is the median of the runs' (each
// number on its own: the median run of one measure need not be the median
// run of another). busy: any run was.
func medianOf(runs []*result) *result {
	if len(runs) == 1 {
		return runs[0]
	}
	m := *runs[0]
	dur := func(f func(*result) *time.Duration) {
		v := make([]time.Duration, len(runs))
		for i, r := range runs {
			v[i] = *f(r)
		}
		*f(&m) = medianValue(v)
	}
	i64 := func(f func(*result) *int64) {
		v := make([]int64, len(runs))
		for i, r := range runs {
			v[i] = *f(r)
		}
		*f(&m) = medianValue(v)
	}
	num := func(f func(*result) *int) {
		v := make([]int, len(runs))
		for i, r := range runs {
			v[i] = *f(r)
		}
		*f(&m) = medianValue(v)
	}
	flt := func(f func(*result) *float64) {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = *f(r)
		}
		*f(&m) = medianValue(v)
	}
	for _, f := range []func(*result) *time.Duration{
		func(r *result) *time.Duration { return &r.nodesReady },
		func(r *result) *time.Duration { return &r.p50 },
		func(r *result) *time.Duration { return &r.p99 },
		func(r *result) *time.Duration { return &r.allRunning },
		func(r *result) *time.Duration { return &r.deleteAll },
		func(r *result) *time.Duration { return &r.cpu },
		func(r *result) *time.Duration { return &r.wall },
		func(r *result) *time.Duration { return &r.cpCPU },
		func(r *result) *time.Duration { return &r.othersCPU },
		func(r *result) *time.Duration { return &r.machineBusy },
	} {
		dur(f)
	}
	for _, f := range []func(*result) *int64{
		func(r *result) *int64 { return &r.apiCalls },
		func(r *result) *int64 { return &r.podCalls },
		func(r *result) *int64 { return &r.podCallsCreating },
		func(r *result) *int64 { return &r.eventCalls },
		func(r *result) *int64 { return &r.wasted.DeletesOfGone },
		func(r *result) *int64 { return &r.wasted.Conflicts },
		func(r *result) *int64 { return &r.cmCalls },
		func(r *result) *int64 { return &r.cmWasted.DeletesOfGone },
		func(r *result) *int64 { return &r.cmWasted.Conflicts },
		func(r *result) *int64 { return &r.refused },
		func(r *result) *int64 { return &r.ownRefused },
		func(r *result) *int64 { return &r.ownTimeouts },
		func(r *result) *int64 { return &r.ownCalls },
		func(r *result) *int64 { return &r.ownWasted.DeletesOfGone },
		func(r *result) *int64 { return &r.ownWasted.Conflicts },
		func(r *result) *int64 { return &r.peakRSS },
	} {
		i64(f)
	}
	for _, f := range []func(*result) *int{
		func(r *result) *int { return &r.running },
		func(r *result) *int { return &r.gone },
		func(r *result) *int { return &r.lostReady },
		func(r *result) *int { return &r.nodesLostReady },
	} {
		num(f)
	}
	for _, f := range []func(*result) *float64{
		func(r *result) *float64 { return &r.perSecond },
		func(r *result) *float64 { return &r.loadBefore },
		func(r *result) *float64 { return &r.loadMean },
		func(r *result) *float64 { return &r.loadPeak },
	} {
		flt(f)
	}
	m.busy = slices.ContainsFunc(runs, func(r *result) bool { return r.busy })
	return &m
}

// spread is " (lowest–highest)" of a measure over the runs, in the
// measure's format; "" for a single run.
func spread(runs []*result, value func(*result) float64, format func(float64) string) string {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = value(r)
	}
	return benchkit.Spread(v, format)
}
