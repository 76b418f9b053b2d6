package main

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	componentlease "k8s.io/component-helpers/apimachinery/lease"
	"k8s.io/utils/clock"

	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/lease"
)

// answer is your prediction (README, Exercise). Read Durations and
// RenewInterval in mycore/lease/lease.go, and pkg/kubelet/kubelet.go line
// 1137 (v1.36.3), fill in both fields, then run: make check LAB=05
// EXERCISE=1. The test runs the lab and the upstream lease controller
// against a real control plane and compares what the apiserver sees with
// what you wrote.
var answer = struct {
	// The lab started with --node-lease-duration-seconds=4: how often is
	// the Lease renewed? A time.Duration, like 3 * time.Second.
	RenewEvery time.Duration
	// The same upstream lease controller, given the renew interval with
	// the unit bug, time.Duration(40*0.25), and a client without a rate
	// limit (as the kubelet's heartbeat client): how many Lease writes
	// does the apiserver get in one second? "one", "four" or "dozens or
	// more"?
	BuggyWritesPerSecond string
}{
	RenewEvery:           0,
	BuggyWritesPerSecond: "",
}

func TestExercise(t *testing.T) {
	testenv.Exercise(t)
	if answer.RenewEvery == 0 || answer.BuggyWritesPerSecond == "" {
		t.Fatalf("fill in both fields of answer at the top of labs/05-register-node/exercise_test.go first (README, Exercise)")
	}
	const name = "t05-exercise"
	j := startLab(t, name, func(o *options) { o.leaseSeconds = 4 }).L
	gaps := renewalGaps(t, testenv.AdminClient(t), name, 6*time.Second)
	if len(gaps) < 2 {
		t.Fatalf("the Lease of %s was renewed %d times in 6 s; the lab said every %s", name, len(gaps)+1, j.agent.RenewInterval)
	}
	slices.Sort(gaps)
	measured := gaps[len(gaps)/2]
	t.Logf("Lease renewals of %s, %d gaps, median %s: %v", name, len(gaps), measured, gaps)
	if d := answer.RenewEvery - measured; d > measured/4 || -d > measured/4 {
		t.Errorf("you predicted the Lease is renewed every %s; it was renewed every %s (median of %d gaps): a quarter of the 4 s lease duration", answer.RenewEvery, measured.Round(10*time.Millisecond), len(gaps))
	}

	writes := hotLoopWrites(t, time.Second)
	saw := ""
	switch {
	case writes <= 2:
		saw = "one"
	case writes >= 3 && writes <= 6:
		saw = "four"
	case writes >= 10:
		saw = "dozens or more"
	default:
		t.Fatalf("the buggy controller wrote its Lease %d times in 1 s: between the choices; run the test again", writes)
	}
	t.Logf("renew interval time.Duration(40*0.25) = %s: %d Lease writes in 1 s", buggyInterval(40), writes)
	if answer.BuggyWritesPerSecond != saw {
		t.Errorf("you predicted %q Lease writes in one second with renew interval time.Duration(40*0.25); the apiserver got %d: that interval is %s, so the controller renews as fast as the apiserver answers", answer.BuggyWritesPerSecond, writes, buggyInterval(40))
	}
}

// renewalGaps watches the node's Lease for d and returns the times
// between its renewals.
func renewalGaps(t *testing.T, admin kubernetes.Interface, name string, d time.Duration) []time.Duration {
	t.Helper()
	w, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Watch(context.Background(), metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var renewals []time.Time
	deadline := time.After(d)
	for {
		select {
		case ev := <-w.ResultChan():
			if l, ok := ev.Object.(*coordinationv1.Lease); ok && ev.Type == watch.Modified && l.Spec.RenewTime != nil {
				renewals = append(renewals, l.Spec.RenewTime.Time)
			}
		case <-deadline:
			var gaps []time.Duration
			for i := 1; i < len(renewals); i++ {
				gaps = append(gaps, renewals[i].Sub(renewals[i-1]))
			}
			return gaps
		}
	}
}

// buggyInterval is the renew interval with the unit bug: the number of
// seconds times the fraction, converted to a Duration (nanoseconds).
func buggyInterval(leaseSeconds int32) time.Duration {
	return time.Duration(float64(leaseSeconds) * lease.RenewIntervalFraction)
}

// hotLoopWrites runs the upstream lease controller with the buggy renew
// interval for d, with a client that has no rate limit (the kubelet's
// heartbeat client, cmd/kubelet/app/server.go), and counts the Lease
// writes that reach the apiserver.
func hotLoopWrites(t *testing.T, d time.Duration) int64 {
	t.Helper()
	cfg, err := testenv.ControlPlane(t).AdminConfig()
	if err != nil {
		t.Fatal(err)
	}
	const leaseName = "t05-exercise-hot-loop"
	cfg.QPS = -1
	var writes atomic.Int64
	lease.ObserveRenewals(cfg, leaseName, func(r lease.Renewal) {
		if r.Err == nil && r.Status < 300 {
			writes.Add(1)
		}
	})
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctl := componentlease.NewController(clock.RealClock{}, client, leaseName, 40, nil, buggyInterval(40), leaseName, v1.NamespaceNodeLease, nil)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ctl.Run(ctx) // returns when ctx ends
	n := writes.Load()
	_ = client.CoordinationV1().Leases(v1.NamespaceNodeLease).Delete(context.Background(), leaseName, metav1.DeleteOptions{})
	return n
}
