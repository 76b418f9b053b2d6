package main

import (
	"strings"
	"testing"
	"testing/fstest"
)

const goodEntry = `{"name":"demo","lab":"07-pleg","title":"t","file":"mycore/x/demo.go","package":"./mycore/x","tests":"^TestDemo$","upstream":["u"],"hints":["h"]}`

func TestCatalogEntriesAreChecked(t *testing.T) {
	for _, tc := range []struct {
		file, entry, want string
	}{
		{"07-demo.json", goodEntry, ""},
		{"08-demo.json", goodEntry, "want 07-demo.json"},
		{"07-demo.json", strings.Replace(goodEntry, `"./mycore/x"`, `"./mycore/y"`, 1), "want the stage file's own package"},
		{"07-demo.json", strings.Replace(goodEntry, `demo.go`, `demo_test.go`, 1), "non-test .go file"},
		{"07-demo.json", strings.Replace(goodEntry, `"hints":["h"]`, `"hints":[]`, 1), "no hints"},
		{"07-demo.json", strings.Replace(goodEntry, `^TestDemo$`, `(`, 1), "tests:"},
		{"07-demo.json", strings.Replace(goodEntry, `"title"`, `"titel"`, 1), "unknown field"},
	} {
		_, err := parseCatalog(fstest.MapFS{"catalog/" + tc.file: {Data: []byte(tc.entry)}})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want it accepted", tc.file, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s %s: err = %v, want one saying %q", tc.file, tc.entry, err, tc.want)
		}
	}
}

func TestParseEventsKeepsLeafTestsAndTheirMessages(t *testing.T) {
	events := `{"Action":"run","Test":"TestA"}
{"Action":"run","Test":"TestA/ok"}
{"Action":"output","Test":"TestA/ok","Output":"=== RUN   TestA/ok\n"}
{"Action":"pass","Test":"TestA/ok"}
{"Action":"run","Test":"TestA/bad"}
{"Action":"output","Test":"TestA/bad","Output":"    a_test.go:9: got 1, want 2 (upstream x.go:3)\n"}
{"Action":"output","Test":"TestA/bad","Output":"--- FAIL: TestA/bad (0.00s)\n"}
{"Action":"fail","Test":"TestA/bad"}
{"Action":"fail","Test":"TestA"}
{"Action":"pass","Test":"TestB"}
`
	r := parseEvents([]byte(events))
	if strings.Join(r.Passed, ",") != "TestA/ok,TestB" || strings.Join(r.Failed, ",") != "TestA/bad" {
		t.Fatalf("passed %v failed %v, want [TestA/ok TestB] and [TestA/bad]", r.Passed, r.Failed)
	}
	if got := strings.Join(r.Messages["TestA/bad"], "|"); got != "a_test.go:9: got 1, want 2 (upstream x.go:3)" {
		t.Errorf("messages = %q", got)
	}
	if r.ok() {
		t.Error("ok() with a failed test")
	}
	build := parseEvents([]byte(`{"ImportPath":"x","Action":"build-output","Output":"# x\n"}
{"ImportPath":"x","Action":"build-output","Output":"./demo.go:3:2: undefined: y\n"}
`))
	if len(build.BuildErrors) != 1 || build.ok() {
		t.Errorf("build errors %q, want the one compiler line and not ok", build.BuildErrors)
	}
}
