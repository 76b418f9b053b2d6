package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/state"
)

// A run to the end leaves nothing: the garbage collector removed the
// pod's containers and sandbox, the final delete its object. So that
// `make check LAB=16` can say what the run did, it keeps a small text
// record in the lab's state folder, one per kind of runtime.

// RecordFile is the record of the last run on a runtime kind: "mock" or
// "containerd" (any flavour), under the state folder's 16-kill-pod/.
func RecordFile(kind string) string { return "last-run-" + kind + ".txt" }

// writeRecord writes what the run saw, one fact a line:
//
//	killpod took 3.066s grace 3s containers 3
//	result KillContainer three ok
//	exit one 137
//	gc removed 3 containers 1 sandboxes 1 logdirs, left 0, object there true
//	object gone true
func writeRecord(kind, runtime string, grace int64, rep *report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# lab 16 on %s, %s: what KillPod and the garbage collector did (make check LAB=16 reads this)\n", runtime, time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "killpod took %.3fs grace %ds containers %d\n", rep.KillTook.Seconds(), grace, len(rep.ExitCodes))
	for _, r := range rep.Results {
		status := "ok"
		if r.Error != nil {
			status = "failed"
		}
		fmt.Fprintf(&b, "result %s %v %s\n", r.Action, r.Target, status)
	}
	names := make([]string, 0, len(rep.ExitCodes))
	for n := range rep.ExitCodes {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(&b, "exit %s %d\n", n, rep.ExitCodes[n])
	}
	fmt.Fprintf(&b, "gc removed %d containers %d sandboxes %d logdirs, left %d, object there %t\n",
		len(rep.GC.Containers), len(rep.GC.Sandboxes), len(rep.GC.LogDirs), rep.LeftAfterGC, rep.ObjectAtGC)
	fmt.Fprintf(&b, "object gone %t\n", rep.Gone)
	if kind != labruntime.Mock {
		kind = labruntime.Containerd
	}
	path, err := state.Path("16-kill-pod", RecordFile(kind))
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
