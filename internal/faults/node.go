package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// leaseFresh is how recently a running node renewed its Lease: a kubelet
// renews every 10 s (a quarter of its 40 s lease, pkg/kubelet/kubelet.go
// nodeLeaseRenewIntervalFraction), so 40 s means it missed several.
const leaseFresh = 40 * time.Second

// runningNode is the node a break works on: name if given, else the one
// node that is Ready with a fresh Lease. A break on a node that is not
// running would show a different fault than the page describes.
func runningNode(ctx context.Context, env *Env, name string) (string, error) {
	nodes, err := env.Admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	var running, all []string
	why := map[string]string{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		all = append(all, n.Name)
		ok, reason := nodeRunning(ctx, env, n)
		why[n.Name] = reason
		if ok {
			running = append(running, n.Name)
		}
	}
	start := "start one first: lab 01 (./boot.sh) or lab 18 (go run ./labs/18-mykubelet), and leave it running"
	if name != "" {
		if !slices.Contains(all, name) {
			return "", fmt.Errorf("no node %s in the cluster (nodes: %s); %s", name, orNone(all), start)
		}
		if !slices.Contains(running, name) {
			return "", fmt.Errorf("node %s is not running: %s; %s", name, why[name], start)
		}
		return name, nil
	}
	switch len(running) {
	case 1:
		return running[0], nil
	case 0:
		return "", fmt.Errorf("this scenario needs a running node, and none is (nodes: %s); %s", orNone(all), start)
	}
	return "", fmt.Errorf("%d nodes are running (%s): name one with --node NAME (make break SCENARIO=… NODE=NAME)", len(running), strings.Join(running, ", "))
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// nodeRunning: Ready=True and its Lease renewed within leaseFresh.
func nodeRunning(ctx context.Context, env *Env, n *v1.Node) (bool, string) {
	ready := "Unknown"
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			ready = string(c.Status)
		}
	}
	if ready != "True" {
		return false, "Ready=" + ready
	}
	l, err := env.Admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		return false, "no Lease: " + err.Error()
	}
	age, ok := leaseAge(l, env.Now())
	if !ok || age > leaseFresh {
		return false, fmt.Sprintf("its Lease was last renewed %s ago", age.Round(time.Second))
	}
	return true, ""
}

// leaseAge is how long ago the Lease was renewed.
func leaseAge(l *coordinationv1.Lease, now time.Time) (time.Duration, bool) {
	if l.Spec.RenewTime == nil {
		return 0, false
	}
	return now.Sub(l.Spec.RenewTime.Time), true
}

// ignoreNotFound: an object already gone is what undo wants.
func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
