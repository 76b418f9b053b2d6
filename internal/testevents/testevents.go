// Package testevents reads the output of `go test -json`: one
// cmd/test2json TestEvent per line. The course's tools that run go test
// and judge what it says — make test's summary (internal/testsummary), the
// exercise check (internal/selfcheck) and the stages' grader
// (internal/stages) — read it with this one loop.
package testevents

import (
	"bufio"
	"encoding/json"
	"io"
)

// Event is one line of go test -json (cmd/test2json's TestEvent).
type Event struct {
	Action     string
	Package    string
	ImportPath string // of build-output and build-fail: "PKG [PKG.test]"
	Test       string
	Output     string
	Elapsed    float64 // of pass, fail and skip: seconds
}

// Read calls fn with every event of r, in order. A line that is not an
// event (go's own messages, a panic's trace before test2json saw it) goes
// to other, when other is not nil.
func Read(r io.Reader, fn func(Event), other func(line []byte)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20) // a test may print long lines
	for sc.Scan() {
		line := sc.Bytes()
		var ev Event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil {
			if other != nil {
				other(line)
			}
			continue
		}
		fn(ev)
	}
	return sc.Err()
}
