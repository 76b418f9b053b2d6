package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelet-labs/internal/testenv"
)

// TestNodeSurvivesAPIServerRestart: the real kubelet's clients reconnect
// on their own; after the apiserver comes back the Lease is renewed again
// and the node is Ready (it stays so when the restart is shorter than the
// grace period).
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
	// Ready again (or still): a restart shorter than the grace period leaves
	// the node Ready throughout; on a loaded machine the restart can take
	// longer, the controller-manager marks the node Unknown meanwhile, and
	// the kubelet's next status post (every 10 s) makes it Ready again.
	testenv.PollNil(t, "the node Ready after the apiserver restart", time.Minute, func() error {
		node, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
				return fmt.Errorf("Ready=%s: %s", c.Status, c.Message)
			}
		}
		return nil
	})
}
