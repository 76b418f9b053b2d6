package mykubelet

import (
	"context"
	"fmt"
	"net"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelet-labs/internal/testenv"
)

// The node records its events in the apiserver, as system:node:NAME: a
// pod whose postStart hook fails gets the container's Pulled, Created and
// Started events, then FailedPostStartHook and Killing — each about the
// container (fieldPath spec.containers{main}) and from the kubelet on
// this node, as kubectl describe pod shows them.
func TestEventsOfAFailedPostStartHook(t *testing.T) {
	// A node with cluster DNS, as in a cluster: without it each pod also
	// gets a Warning MissingClusterDNS about the pod itself (dns_test.go).
	n := startNode(t, "events-node", Options{ClusterDNS: []net.IP{net.ParseIP("10.0.0.10")}})
	ns := n.namespace(t)
	grace := int64(1)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hooked", Namespace: ns},
		Spec: v1.PodSpec{NodeName: n.name, TerminationGracePeriodSeconds: &grace, Containers: []v1.Container{{
			Name: "main", Image: mockBusyboxImage, Command: []string{"sh", "-c", "sleep 600"},
			Lifecycle: &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "exit 3"}}}},
		}}},
	}
	if _, err := n.admin.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"Pulled", "Created", "Started", "FailedPostStartHook", "Killing"}
	testenv.PollNil(t, "the pod's events", patient, func() error {
		evs, err := n.admin.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=hooked"})
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, e := range evs.Items {
			if e.Source.Component != "kubelet" || e.Source.Host != n.name || e.InvolvedObject.FieldPath != "spec.containers{main}" {
				return fmt.Errorf("event %s %q from %v about %q, want the kubelet on %s about spec.containers{main}", e.Reason, e.Message, e.Source, e.InvolvedObject.FieldPath, n.name)
			}
			seen[e.Reason] = true
			if e.Reason == "FailedPostStartHook" && (e.Type != v1.EventTypeWarning || e.Message != "PostStartHook failed") {
				return fmt.Errorf("FailedPostStartHook event: %s %q, want Warning %q", e.Type, e.Message, "PostStartHook failed")
			}
		}
		for _, r := range want {
			if !seen[r] {
				return fmt.Errorf("no %s event yet (have %v)", r, seen)
			}
		}
		return nil
	})
}
