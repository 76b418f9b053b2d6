package lease

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestRenewInterval(t *testing.T) {
	for lease, want := range map[time.Duration]time.Duration{
		40 * time.Second: 10 * time.Second, // the kubelet's default
		20 * time.Second: 5 * time.Second,
		10 * time.Second: 2500 * time.Millisecond,
	} {
		if got := RenewInterval(lease); got != want {
			t.Errorf("RenewInterval(%s) = %s, want %s", lease, got, want)
		}
	}
	// The bug of the course we replace: the fraction applied to a plain
	// number of seconds, then read as nanoseconds.
	if bug := time.Duration(40 * 0.25); bug != 10*time.Nanosecond || bug >= MinRenewInterval {
		t.Errorf("time.Duration(40*0.25) = %s", bug)
	}
}

func TestDurations(t *testing.T) {
	l, r, err := Config{}.Durations()
	if err != nil || l != 40*time.Second || r != 10*time.Second {
		t.Errorf("default: %s %s %v, want 40s 10s", l, r, err)
	}
	if _, _, err := (Config{LeaseDurationSeconds: -1}).Durations(); err == nil {
		t.Error("negative lease duration accepted")
	}
	if _, r, err := (Config{LeaseDurationSeconds: 1}).Durations(); err != nil || r != 250*time.Millisecond {
		t.Errorf("1s lease: renew %s err %v", r, err)
	}
}

// TestControllerIsNotAHotLoop runs the real lease controller against a fake
// clientset with a 1 s lease (renew every 250 ms) for ~1.1 s: a handful of
// writes, an owner reference to the Node, the right duration.
func TestControllerIsNotAHotLoop(t *testing.T) {
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-1"}})
	var writes atomic.Int32
	client.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetVerb() == "create" || a.GetVerb() == "update" {
			writes.Add(1)
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	ctl, renew, err := NewController(ctx, Config{Client: client, NodeName: "n1", LeaseDurationSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if renew != 250*time.Millisecond {
		t.Fatalf("renew %s", renew)
	}
	done := make(chan struct{})
	go func() { ctl.Run(ctx); close(done) }()
	time.Sleep(1100 * time.Millisecond)
	cancel()
	<-done
	if n := writes.Load(); n < 3 || n > 7 {
		t.Errorf("%d lease writes in 1.1s with a 250ms renew interval, want ~5", n)
	}
	l, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkLease(t, l)
}

func checkLease(t *testing.T, l *coordinationv1.Lease) {
	t.Helper()
	if *l.Spec.HolderIdentity != "n1" || *l.Spec.LeaseDurationSeconds != 1 || l.Spec.RenewTime == nil {
		t.Errorf("lease spec %+v", l.Spec)
	}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" || l.OwnerReferences[0].UID != "uid-1" {
		t.Errorf("owner references %+v", l.OwnerReferences)
	}
}
