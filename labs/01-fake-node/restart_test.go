package main

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelet-labs/internal/testenv"
)

// TestNodeSurvivesAPIServerRestart: the real kubelet's clients reconnect
// on their own; after the apiserver comes back the Lease is renewed again
// and the node stays Ready (the restart is far shorter than the grace
// period).
func TestNodeSurvivesAPIServerRestart(t *testing.T) {
	const name = "fake-node-restart"
	fakeNode(t, name)
	cp := testenv.ControlPlane(t)
	admin := testenv.AdminClient(t)
	ctx := context.Background()

	t0 := time.Now()
	if err := cp.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	t.Logf("apiserver restarted in %s with a kubelet attached", restarted.Sub(t0).Round(10*time.Millisecond))

	var renewedAfter time.Duration
	testenv.PollTrue(t, "the Lease renewed after the apiserver restart", time.Minute, func() bool {
		l, err := admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, name, metav1.GetOptions{})
		if err != nil || !l.Spec.RenewTime.After(restarted) {
			return false
		}
		renewedAfter = l.Spec.RenewTime.Sub(restarted)
		return true
	})
	t.Logf("first lease renewal %s after the restart", renewedAfter.Round(10*time.Millisecond))
	node, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			t.Errorf("node Ready=%s after the restart: %s", c.Status, c.Message)
		}
	}
}
