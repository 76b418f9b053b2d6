package mykubelet

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelet-labs/internal/testenv"
)

// A node without cluster DNS (the kubelet's default) runs a ClusterFirst
// pod with the host's DNS and says so, as the kubelet does
// (pkg/kubelet/network/dns/dns.go:416-422): a Warning MissingClusterDNS
// about the Node and one about the pod, from the kubelet on this node —
// kubectl describe shows them.
func TestMissingClusterDNSEvents(t *testing.T) {
	n := startNode(t, "dns-node", Options{})
	ns := n.namespace(t)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: ns},
		Spec: v1.PodSpec{NodeName: n.name, Containers: []v1.Container{{
			Name: "main", Image: mockBusyboxImage, Command: []string{"sh", "-c", "sleep 600"},
		}}},
	}
	if _, err := n.admin.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const msg = `kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.`
	find := func(ns, kind, name string) error {
		evs, err := n.admin.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=MissingClusterDNS,involvedObject.name=" + name})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Type == v1.EventTypeWarning && e.InvolvedObject.Kind == kind && e.Source.Component == "kubelet" && e.Source.Host == n.name &&
				(e.Message == msg || e.Message == fmt.Sprintf("pod: %q. %s", "plain_"+ns+"("+string(e.InvolvedObject.UID)+")", msg)) {
				return nil
			}
		}
		return fmt.Errorf("no Warning MissingClusterDNS about %s %s from the kubelet on %s (have %d others)", kind, name, n.name, len(evs.Items))
	}
	testenv.PollNil(t, "MissingClusterDNS events", patient, func() error {
		if err := find(ns, "Pod", "plain"); err != nil {
			return err
		}
		return find(metav1.NamespaceDefault, "Node", n.name) // events about a Node are in default
	})
}
