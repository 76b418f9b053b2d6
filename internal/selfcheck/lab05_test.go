package main

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestLeaseRenewingOnlyWhileTheLabRuns: a Lease renewed within one renew
// interval (and some slack) is a running lab; one renewed 30 s ago is not.
func TestLeaseRenewingOnlyWhileTheLabRuns(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: lab05Node, UID: "u1"}}
	holder, secs := lab05Node, int32(40)
	now := time.Now()
	for _, tc := range []struct {
		age  time.Duration
		done bool
	}{{3 * time.Second, true}, {14 * time.Second, true}, {30 * time.Second, false}} {
		renewed := metav1.NewMicroTime(now.Add(-tc.age))
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: lab05Node, Namespace: corev1.NamespaceNodeLease,
				OwnerReferences: []metav1.OwnerReference{{Kind: "Node", Name: lab05Node, UID: "u1"}}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &renewed},
		}
		r := lab05Lease(context.Background(), fake.NewClientset(l), node, now)
		if r.Done != tc.done {
			t.Errorf("renewed %s ago: done=%v (%s), want %v", tc.age, r.Done, r.What, tc.done)
		}
		if !tc.done && !strings.Contains(r.What, "not running") {
			t.Errorf("renewed %s ago: %q does not say the lab is not running", tc.age, r.What)
		}
	}
	// No Lease at all: not yet.
	r := lab05Lease(context.Background(), fake.NewClientset(), node, now)
	if r.Done {
		t.Errorf("no Lease: %+v", r)
	}
}
