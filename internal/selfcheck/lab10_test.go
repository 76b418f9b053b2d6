package main

import (
	"strings"
	"testing"
)

// A run's workers.log, as lab 10 writes it (from the README's walk-through).
const lab10Log = `04:32:56.055 worker    started    default/oneshot [sync]
04:32:56.056 worker    sync       default/oneshot SyncPod (create) after waiting 0s for the pod cache
04:32:57.138 worker    sync       default/oneshot SyncPod (update) after waiting 603ms for the pod cache
04:33:04.150 worker    transition default/oneshot sync → terminating: SyncPod reported the pod terminal
04:33:06.166 worker    finished   default/oneshot [terminated]: SyncTerminatedPod succeeded
04:33:13.802 worker    transition default/slowstop terminating → terminating, grace 5s: grace period shortened
04:33:19.220 worker    finished   default/slowstop [terminated, grace 5s]: SyncTerminatedPod succeeded
04:33:24.081 worker    removed    default/oneshot [terminated]: finished and no longer in config
`

// TestLab10Steps: each walk-through step is done once its lines are in
// the record (and its pod gone where it must be), and not before.
func TestLab10Steps(t *testing.T) {
	gone := func(string) bool { return true }
	res := lab10Steps(lab10Log).results(gone)
	if len(res) != 4 {
		t.Fatalf("%d results, want 4", len(res))
	}
	for i, r := range res {
		if !r.Done {
			t.Errorf("step %d: not done: %s", i+1, r.What)
		}
	}
	if !strings.Contains(res[0].What, "603ms") {
		t.Errorf("step 1 does not say how long the update waited: %s", res[0].What)
	}
	// Only the first two steps done: 3 and 4 say not yet, with hints.
	half := lab10Log[:strings.Index(lab10Log, "04:33:13.802")]
	res = lab10Steps(half).results(func(string) bool { return false })
	for i, r := range res {
		if r.Done != (i < 2) || (!r.Done && r.Hint == "") {
			t.Errorf("step %d with half the log: %+v", i+1, r)
		}
	}
	if res := lab10Steps("").results(gone); res[0].Done {
		t.Error("an empty record says step 1 done")
	}
}
