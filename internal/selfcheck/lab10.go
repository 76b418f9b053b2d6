package main

import (
	"context"
	"os"
	"regexp"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelet-labs/internal/labnames"
)

// Lab 10's pod workers live in the lab's process; it records their steps
// in the node's folder (nodes/lab-node-10/workers.log, this run's), and
// the checks read them together with what the apiserver has: the node,
// and the pods the walk-through created and deleted.
func init() {
	register("10", labCheck{Title: "pod workers: sync, terminating, terminated, gated on the pod cache", Check: checkLab10})
}

const (
	lab10Node  = labnames.Node10
	lab10Start = "start the lab in another terminal and leave it running: go run ./labs/10-pod-workers (README: Run it)"
)

func checkLab10(ctx context.Context, e *Env) []Result {
	kube, err := e.Kube(ctx)
	if err != nil {
		return NoCluster(err)
	}
	node, err := kube.CoreV1().Nodes().Get(ctx, lab10Node, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return NoCluster(err)
	}
	var results []Result
	if err != nil {
		results = append(results, NotYet("no node "+lab10Node, lab10Start))
	} else {
		results = append(results, Done("node %s joined (Ready=%s)", lab10Node, readyStatus(node)))
	}

	b, err := os.ReadFile(e.StatePath("nodes", lab10Node, "workers.log"))
	if err != nil {
		return append(results, NotYet("no record of the pod workers (nodes/"+lab10Node+"/workers.log): the lab has not run", lab10Start+", then do the Walk-through"))
	}
	steps := lab10Steps(string(b))
	gone := func(name string) bool {
		_, err := kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
	if !steps.oneshotGone && steps.oneshotEnd && gone("oneshot") {
		// Step 4 is in flight: the pod is gone from the apiserver, and
		// the lab's housekeeping (every 2 s) forgets its finished worker
		// on its next tick. `make check` typed right after `kubectl delete`
		// would otherwise report a step the learner did do.
		steps = lab10AwaitRemoved(ctx, e.StatePath("nodes", lab10Node, "workers.log"), steps)
	}
	return append(results, steps.results(gone)...)
}

// lab10Housekeeping is how long the check waits for the removal of a
// finished worker whose pod was just deleted: two of the lab's
// housekeeping periods (--housekeeping, 2 s).
const lab10Housekeeping = 4 * time.Second

func lab10AwaitRemoved(ctx context.Context, logPath string, steps lab10Record) lab10Record {
	ctx, cancel := context.WithTimeout(ctx, lab10Housekeeping)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for !steps.oneshotGone {
		select {
		case <-ctx.Done():
			return steps
		case <-tick.C:
		}
		if b, err := os.ReadFile(logPath); err == nil {
			steps = lab10Steps(string(b))
		}
	}
	return steps
}

// lab10Record is what workers.log says about the walk-through's pods.
type lab10Record struct {
	updateSync  string // step 1: the label's SyncPod (update) line's wait
	terminal    bool   // step 2: oneshot went terminating on its own
	oneshotEnd  bool   // step 2: its worker finished
	shortened   bool   // step 3: slowstop's grace shortened to 5 s
	slowEnd     bool   // step 3: its worker finished
	oneshotGone bool   // step 4: finished and no longer in config
}

var lab10Wait = regexp.MustCompile(`sync +default/oneshot SyncPod \(update\) after waiting (\S+) for the pod cache`)

func lab10Steps(log string) lab10Record {
	var r lab10Record
	for _, line := range strings.Split(log, "\n") {
		switch {
		case lab10Wait.MatchString(line):
			r.updateSync = lab10Wait.FindStringSubmatch(line)[1]
		case strings.Contains(line, "transition default/oneshot sync → terminating: SyncPod reported the pod terminal"):
			r.terminal = true
		case strings.Contains(line, "finished   default/oneshot"):
			r.oneshotEnd = true
		case strings.Contains(line, "transition default/slowstop terminating → terminating, grace 5s: grace period shortened"):
			r.shortened = true
		case strings.Contains(line, "finished   default/slowstop"):
			r.slowEnd = true
		case strings.Contains(line, "removed    default/oneshot"):
			r.oneshotGone = true
		}
	}
	return r
}

// results turns the record into one result per walk-through step; gone
// says whether the apiserver no longer has a pod.
func (r lab10Record) results(gone func(string) bool) []Result {
	var out []Result
	if r.updateSync != "" {
		out = append(out, Done("step 1: oneshot created, and its label's update synced after waiting %s for the pod cache (workers.log)", r.updateSync))
	} else {
		out = append(out, NotYet("step 1: no SyncPod (update) of default/oneshot in this run's workers.log",
			"Walk-through step 1: kubectl apply -f labs/10-pod-workers/oneshot.yaml && kubectl label pod oneshot step=2"))
	}
	switch {
	case r.terminal && r.oneshotEnd:
		out = append(out, Done("step 2: oneshot's container exited; its worker went terminating by itself and finished"))
	default:
		out = append(out, NotYet("step 2: oneshot did not go terminal in this run",
			"Walk-through step 2: make its container exit with the curl command the lab printed"))
	}
	switch {
	case r.shortened && r.slowEnd && gone("slowstop"):
		out = append(out, Done("step 3: slowstop's second delete shortened its grace period to 5s; it finished and the lab deleted it for good"))
	case r.shortened:
		out = append(out, NotYet("step 3: slowstop's grace period was shortened, but it is not finished and deleted yet",
			"wait: kubectl wait --for=delete pod/slowstop --timeout=1m"))
	default:
		out = append(out, NotYet("step 3: no grace period of slowstop shortened to 5s in this run",
			"Walk-through step 3: kubectl apply -f labs/10-pod-workers/slowstop.yaml, kubectl delete pod slowstop --wait=false, then again with --grace-period=5"))
	}
	if r.oneshotGone && gone("oneshot") {
		out = append(out, Done("step 4: oneshot deleted; its finished worker was removed"))
	} else {
		out = append(out, NotYet("step 4: oneshot is not deleted and forgotten yet", "Walk-through step 4: kubectl delete pod oneshot"))
	}
	return out
}
