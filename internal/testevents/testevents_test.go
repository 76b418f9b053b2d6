package testevents

import (
	"strings"
	"testing"
)

func TestReadSplitsEventsFromOtherLines(t *testing.T) {
	in := `{"Action":"run","Package":"p","Test":"TestA"}
FAIL	p [build failed]
{"Action":"fail","Package":"p","Test":"TestA","Elapsed":0.5}
{not json
`
	var events []Event
	var others []string
	if err := Read(strings.NewReader(in), func(ev Event) { events = append(events, ev) }, func(l []byte) { others = append(others, string(l)) }); err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 || events[1].Action != "fail" || events[1].Elapsed != 0.5 || events[0].Test != "TestA" {
		t.Errorf("events %+v", events)
	}
	if strings.Join(others, "|") != "FAIL\tp [build failed]|{not json" {
		t.Errorf("other lines %q", others)
	}
}
