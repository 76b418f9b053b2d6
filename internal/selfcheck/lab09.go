package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelet-labs/internal/labnames"
)

const (
	lab09Node  = labnames.Node09
	lab09Start = "start the lab: go run ./labs/09-pod-manager (and leave it running)"
	// lab09Record is the record the lab writes in its node folder, one
	// line per op its source sent (labs/09-pod-manager/record.go says
	// why): "TIME OP NAMESPACE/NAME [grace=N] [mirror]".
	lab09Record = "ops.log"
)

func init() {
	register("09", labCheck{Title: "the pod manager and the ops that feed it", Check: checkLab09})
}

// checkLab09 looks at lab 09's node and at the ops its source sent, as
// the lab recorded them: one result per command of the README's second
// terminal.
func checkLab09(ctx context.Context, e *Env) []Result {
	kube, err := e.Kube(ctx)
	if err != nil {
		return NoCluster(err)
	}
	var results []Result
	switch _, err := kube.CoreV1().Nodes().Get(ctx, lab09Node, metav1.GetOptions{}); {
	case apierrors.IsNotFound(err):
		results = append(results, NotYet("no Node "+lab09Node+": the lab has not joined yet", lab09Start))
	case err != nil:
		return NoCluster(err)
	default:
		running, ago := lab08LeaseRenewed(ctx, kube, lab09Node)
		results = append(results, Done("node %s joined (%s)", lab09Node, lab08LeaseWords(running, ago)))
	}
	path := e.StatePath("nodes", lab09Node, lab09Record)
	data, err := os.ReadFile(path)
	if err != nil {
		data = nil // no record: no op seen yet
	}
	return append(results, lab09Ops(parseLab09Record(string(data)), path)...)
}

// lab09Op is one line of the record.
type lab09Op struct {
	time, op, pod string
	grace         int64 // -1: none given
	mirror        bool
}

func parseLab09Record(text string) []lab09Op {
	var ops []lab09Op
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		o := lab09Op{time: f[0], op: f[1], pod: f[2], grace: -1}
		for _, extra := range f[3:] {
			if g, ok := strings.CutPrefix(extra, "grace="); ok {
				if n, err := strconv.ParseInt(g, 10, 64); err == nil {
					o.grace = n
				}
			}
			o.mirror = o.mirror || extra == "mirror"
		}
		ops = append(ops, o)
	}
	return ops
}

// lab09Ops says, per command of the README, whether the op it causes is in
// the record (of pods, not mirror pods: those are the exercise's).
func lab09Ops(ops []lab09Op, path string) []Result {
	find := func(match func(i int, o lab09Op) bool) (lab09Op, bool) {
		for i, o := range ops {
			if !o.mirror && match(i, o) {
				return o, true
			}
		}
		return lab09Op{}, false
	}
	var results []Result
	for _, step := range []struct {
		what, command string
		match         func(i int, o lab09Op) bool
	}{
		{"ADD of a pod bound to the node: new to the source", "kubectl apply -f labs/09-pod-manager/pod.yaml",
			func(_ int, o lab09Op) bool { return o.op == "ADD" }},
		{"UPDATE: its labels changed", "kubectl label pod web tier=frontend",
			func(_ int, o lab09Op) bool { return o.op == "UPDATE" }},
		{"RECONCILE: only its status changed", "kubectl patch pod web --subresource=status --type=merge -p '{\"status\":{\"conditions\":[{\"type\":\"example.com/Checked\",\"status\":\"True\"}]}}'",
			func(_ int, o lab09Op) bool { return o.op == "RECONCILE" }},
		{"DELETE with a grace period: a graceful deletion, the pod stays Terminating", "kubectl delete pod web --wait=false",
			func(_ int, o lab09Op) bool { return o.op == "DELETE" && o.grace > 0 }},
		{"DELETE with grace 0, then REMOVE: a forced deletion", "kubectl delete pod web --grace-period=0 --force",
			func(i int, o lab09Op) bool {
				if o.op != "DELETE" || o.grace != 0 {
					return false
				}
				for _, later := range ops[i+1:] {
					if later.op == "REMOVE" && later.pod == o.pod {
						return true
					}
				}
				return false
			}},
	} {
		if o, ok := find(step.match); ok {
			results = append(results, Done("%s — %s at %s", step.what, o.pod, o.time))
			continue
		}
		results = append(results, NotYet(fmt.Sprintf("not in the lab's record (%s) yet: %s", path, step.what), step.command+" (README, Run it: the second terminal), with the lab running"))
	}
	return results
}
