package journal

import (
	"encoding/json"
	"fmt"
	"sort"
)

// ChromeTrace writes entries in the Chrome trace event format (the JSON
// Object Format of "Trace Event Format", the one chrome://tracing and
// Perfetto's ui.perfetto.dev open): one process per node, one thread per
// pod — the live view's lanes — plus a "node" thread for what belongs to no
// pod. A step with a duration (a CRI call, a worker's wait, a back-off) is a
// complete event ("X") that ends when it was published; the rest are
// instant events ("i"); each relist is a counter ("C") of its duration.
// Every event carries its Entry in args.entry, so the live view loads the
// file back unchanged.
func ChromeTrace(entries []Entry) ([]byte, error) {
	type event struct {
		Name  string         `json:"name"`
		Cat   string         `json:"cat,omitempty"`
		Ph    string         `json:"ph"`
		Ts    int64          `json:"ts"` // microseconds
		Dur   int64          `json:"dur,omitempty"`
		Pid   int            `json:"pid"`
		Tid   int            `json:"tid"`
		Scope string         `json:"s,omitempty"`
		Args  map[string]any `json:"args,omitempty"`
	}
	pids, tids := map[string]int{}, map[[2]string]int{}
	var meta, events []event
	pid := func(node string) int {
		if p, ok := pids[node]; ok {
			return p
		}
		p := len(pids) + 1
		pids[node] = p
		name := "node " + node
		if node == "" {
			name = "node"
		}
		meta = append(meta, event{Name: "process_name", Ph: "M", Pid: p, Args: map[string]any{"name": name}})
		return p
	}
	tid := func(node, lane string) int {
		key := [2]string{node, lane}
		if t, ok := tids[key]; ok {
			return t
		}
		t := len(tids) + 1
		tids[key] = t
		name := lane
		if lane == "" {
			name = "node"
		}
		meta = append(meta, event{Name: "thread_name", Ph: "M", Pid: pid(node), Tid: t, Args: map[string]any{"name": name}})
		return t
	}
	for _, e := range entries {
		ev := event{Name: traceName(e), Cat: string(e.Kind), Pid: pid(e.Node), Tid: tid(e.Node, e.Pod), Args: map[string]any{"entry": e}}
		end := e.At.UnixMicro()
		switch {
		case e.Kind == Relist:
			ev.Ph, ev.Ts, ev.Name = "C", end, "PLEG relist (ms)"
			ev.Args["ms"] = float64(e.Took.Microseconds()) / 1000
		case e.Kind == BackOff && !e.Until.IsZero() && e.Until.After(e.At):
			ev.Ph, ev.Ts, ev.Dur = "X", end, e.Until.Sub(e.At).Microseconds()
		case e.Took > 0 && e.Kind != Status:
			ev.Ph, ev.Ts, ev.Dur = "X", end-e.Took.Microseconds(), e.Took.Microseconds()
		default:
			ev.Ph, ev.Ts, ev.Scope = "i", end, "t"
		}
		events = append(events, ev)
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].Ts < events[j].Ts })
	return json.Marshal(struct {
		TraceEvents     []event `json:"traceEvents"`
		DisplayTimeUnit string  `json:"displayTimeUnit"`
	}{append(meta, events...), "ms"})
}

// traceName is an event's short name: the kind and its verb.
func traceName(e Entry) string {
	switch {
	case e.Call == "":
		return string(e.Kind)
	case e.Container != "":
		return fmt.Sprintf("%s %s (%s)", e.Kind, e.Call, e.Container)
	}
	return fmt.Sprintf("%s %s", e.Kind, e.Call)
}

// ReadChromeTrace reads back the entries ChromeTrace wrote (args.entry of
// each event), in their order of publication.
func ReadChromeTrace(data []byte) ([]Entry, error) {
	var f struct {
		TraceEvents []struct {
			Args struct {
				Entry *Entry `json:"entry"`
			} `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("not a trace file: %w", err)
	}
	var out []Entry
	for _, ev := range f.TraceEvents {
		if ev.Args.Entry != nil {
			out = append(out, *ev.Args.Entry)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no entry of ours in the trace: was it saved by the live view?")
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out, nil
}
