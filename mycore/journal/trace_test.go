package journal

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

func TestChromeTraceRoundTripsAndIsPerfettosFormat(t *testing.T) {
	at := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	in := []Entry{
		{Seq: 1, At: at, Node: "n1", Kind: Config, Pod: "default/web", UID: "u1", Call: "ADD", Text: "config  ADD default/web"},
		{Seq: 2, At: at.Add(90 * time.Millisecond), Node: "n1", Kind: CRI, Pod: "default/web", Call: "RunPodSandbox", Took: 80 * time.Millisecond, Text: "CRI RunPodSandbox"},
		{Seq: 3, At: at.Add(time.Second), Node: "n1", Kind: Relist, Took: 3 * time.Millisecond, Threshold: 3 * time.Minute},
		{Seq: 4, At: at.Add(2 * time.Second), Node: "n1", Kind: BackOff, Pod: "default/web", Container: "app", Until: at.Add(12 * time.Second)},
	}
	data, err := ChromeTrace(in)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	phases := map[string]int{}
	lanes := map[string]bool{}
	for _, ev := range f.TraceEvents {
		phases[ev["ph"].(string)]++
		if ev["name"] == "thread_name" {
			lanes[ev["args"].(map[string]any)["name"].(string)] = true
		}
		if ev["ph"] == "X" && ev["cat"] == "cri" {
			if ts, dur := ev["ts"].(float64), ev["dur"].(float64); dur != 80000 || int64(ts) != at.Add(10*time.Millisecond).UnixMicro() {
				t.Errorf("the CRI call is ts %v dur %v µs, want it to start 80 ms before it was published and last 80 ms", ts, dur)
			}
		}
		if ev["ph"] == "X" && ev["cat"] == "backoff" && ev["dur"].(float64) != 10e6 {
			t.Errorf("the back-off lasts %v µs, want 10 s (until its end)", ev["dur"])
		}
	}
	if phases["M"] != 3 || phases["X"] != 2 || phases["i"] != 1 || phases["C"] != 1 {
		t.Errorf("phases %v, want 3 metadata (the node, its two lanes), 2 complete, 1 instant, 1 counter", phases)
	}
	if !lanes["default/web"] || !lanes["node"] {
		t.Errorf("lanes %v, want default/web and node", lanes)
	}
	back, err := ReadChromeTrace(data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		in[i].At = in[i].At.Local()
		in[i].Until = in[i].Until.Local()
		back[i].At = back[i].At.Local()
		back[i].Until = back[i].Until.Local()
	}
	if !reflect.DeepEqual(back, in) {
		t.Errorf("read back\n%+v\nwant\n%+v", back, in)
	}
}

func TestReadChromeTraceRefusesAnotherFile(t *testing.T) {
	if _, err := ReadChromeTrace([]byte(`{"traceEvents":[{"name":"x","ph":"i","ts":1,"pid":1,"tid":1}]}`)); err == nil {
		t.Error("a trace with none of our entries was read")
	}
	if _, err := ReadChromeTrace([]byte(`<html>`)); err == nil {
		t.Error("a file that is no JSON was read")
	}
}
