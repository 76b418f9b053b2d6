package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/state"
)

// The lab removes everything it made — the pod object, its sandbox and
// containers — so nothing of a run is left for `make check LAB=15` to look
// at. What the run saw is kept instead in a small text file in the lab's
// state folder, one per kind of runtime: RecordFile(kind).

// RecordFile is the record of the last run on a runtime kind: "mock" or
// "containerd" (any flavour), under the state folder's 15-stop-escalation/.
func RecordFile(kind string) string { return "last-run-" + kind + ".txt" }

// recordKind is the record a runtime's run goes to.
func recordKind(kind string) string {
	if kind == labruntime.Mock {
		return labruntime.Mock
	}
	return labruntime.Containerd
}

// writeRecord writes one line per container stop:
//
//	part 1 polite exit 143 grace 3s took 1.153s
func writeRecord(kind string, rep *report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# lab 15 on %s, %s: how each stop ended (make check LAB=15 reads this)\n", rep.Runtime, time.Now().UTC().Format(time.RFC3339))
	for i, part := range rep.Parts {
		for _, s := range part {
			fmt.Fprintf(&b, "part %d %s exit %d grace %ds took %.3fs\n", i+1, s.Name, s.ExitCode, s.Grace, s.Took.Seconds())
		}
	}
	path, err := state.Path("15-stop-escalation", RecordFile(recordKind(kind)))
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
