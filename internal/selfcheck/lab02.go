package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"kubelet-labs/internal/labnames"
)

// Lab 02 leaves what its run did on the cluster: the Node it joined, its
// Lease (renewTime = the last heartbeat), and the node lifecycle
// controller's NodeNotReady event from when the heartbeat stopped.
func init() {
	register("02", labCheck{Title: "why a node is Ready: the Lease", Check: checkLab02})
}

const lab02Node = labnames.Node02 // the lab's default --node-name

func checkLab02(ctx context.Context, e *Env) []Result {
	kube, err := e.Kube(ctx)
	if err != nil {
		return NoCluster(err)
	}
	run := "run the lab: go run ./labs/02-node-lease (README, Run it)"
	results := []Result{lab02Joined(ctx, e, kube, run)}
	l, err := kube.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, lab02Node, metav1.GetOptions{})
	if err != nil {
		results = append(results, NotYet("Lease kube-node-lease/"+lab02Node+": "+err.Error(), run))
		l = nil
	} else {
		results = append(results, lab02Lease(l))
	}
	notReady, err := lab02NotReadyEvents(ctx, kube)
	if err != nil {
		return append(results, NotYet("events of Node "+lab02Node+": "+err.Error(), run))
	}
	return append(results, lab02Unknown(notReady, run), lab02Resumed(notReady, l, run))
}

// lab02Joined: step 1 of the lab, the join (lab 05's code).
func lab02Joined(ctx context.Context, e *Env, kube kubernetes.Interface, run string) Result {
	n, err := kube.CoreV1().Nodes().Get(ctx, lab02Node, metav1.GetOptions{})
	if err != nil {
		return NotYet("Node "+lab02Node+": "+err.Error(), run)
	}
	kubeconfig := e.StatePath("nodes", lab02Node, "kubelet.kubeconfig")
	if !exists(kubeconfig) {
		return NotYet(fmt.Sprintf("Node %s exists, but no credentials in the state folder (%s)", lab02Node, kubeconfig),
			"run the lab with this state folder: go run ./labs/02-node-lease")
	}
	ready := "no Ready condition"
	if c := readyCondition(n); c != nil {
		ready = fmt.Sprintf("Ready=%s now", c.Status)
	}
	return Done("Node %s joined with its own credentials (nodes/%s/%s); %s", lab02Node, lab02Node, filepath.Base(kubeconfig), ready)
}

// lab02Lease: the heartbeat object, with the duration the node asked for.
func lab02Lease(l *coordinationv1.Lease) Result {
	holder, secs := "", int32(0)
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	if l.Spec.LeaseDurationSeconds != nil {
		secs = *l.Spec.LeaseDurationSeconds
	}
	if l.Spec.RenewTime == nil {
		return NotYet("Lease kube-node-lease/"+lab02Node+" was never renewed", "run the lab: go run ./labs/02-node-lease")
	}
	return Done("Lease kube-node-lease/%s: holder %s, %ds (renewed every %s), last renewed %s ago",
		lab02Node, holder, secs, time.Duration(secs)*time.Second/4, time.Since(l.Spec.RenewTime.Time).Round(time.Second))
}

// lab02NotReadyEvents lists the node lifecycle controller's NodeNotReady
// events for the lab's node (kubectl events --for node/lab-node-02).
func lab02NotReadyEvents(ctx context.Context, kube kubernetes.Interface) ([]v1.Event, error) {
	sel := fields.Set{"involvedObject.kind": "Node", "involvedObject.name": lab02Node, "reason": "NodeNotReady"}.AsSelector().String()
	list, err := kube.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// lab02FirstEvent is when the first of events happened.
func lab02FirstEvent(events []v1.Event) time.Time {
	var first time.Time
	for _, ev := range events {
		t := ev.FirstTimestamp.Time
		if t.IsZero() {
			t = ev.EventTime.Time
		}
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	return first
}

// lab02Unknown: step 3, the heartbeat stopped and the controller noticed.
func lab02Unknown(events []v1.Event, run string) Result {
	if len(events) == 0 {
		return NotYet("no NodeNotReady event for "+lab02Node+": the node lifecycle controller has not marked it Unknown (events last an hour)", run)
	}
	first := lab02FirstEvent(events)
	return Done("the node lifecycle controller marked it NotReady when the heartbeat stopped: event NodeNotReady at %s", first.Local().Format("15:04:05"))
}

// lab02Resumed: step 4, the heartbeat came back after the controller had
// marked the node: the Lease was renewed after the first NodeNotReady.
func lab02Resumed(events []v1.Event, l *coordinationv1.Lease, run string) Result {
	if len(events) == 0 || l == nil || l.Spec.RenewTime == nil {
		return NotYet("no heartbeat seen after a NodeNotReady", run)
	}
	first := lab02FirstEvent(events)
	if !l.Spec.RenewTime.After(first) {
		return NotYet(fmt.Sprintf("the Lease was last renewed at %s, before the NodeNotReady at %s: the heartbeat never resumed",
			l.Spec.RenewTime.Local().Format("15:04:05"), first.Local().Format("15:04:05")), "run the lab to its end (--resume=true, the default): go run ./labs/02-node-lease")
	}
	return Done("the heartbeat resumed after it: Lease renewed at %s, after the NodeNotReady at %s",
		l.Spec.RenewTime.Local().Format("15:04:05"), first.Local().Format("15:04:05"))
}
