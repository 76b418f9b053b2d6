package controlplane

import "testing"

// The "kubernetes" Service gets the apiserver's address as its endpoint
// (the lease reconciler) only where pods can dial it: never on loopback,
// which the reconciler refuses.
func TestEndpointReconcilerFollowsTheAddress(t *testing.T) {
	for addr, want := range map[string]string{"127.0.0.1": "none", "::1": "none", "192.0.2.2": "lease", "172.18.0.1": "lease"} {
		if got := endpointReconciler(addr); got != want {
			t.Errorf("apiserver on %s: --endpoint-reconciler-type=%s, want %s", addr, got, want)
		}
	}
}
