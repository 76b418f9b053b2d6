package main

import (
	"bytes"
	"context"
	"math"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/node"
)

// The exercise, at a quarter of the README's scale so it takes a minute:
// kube-controller-manager runs with --node-monitor-grace-period=10s, and
// this lab runs two nodes. Write your predictions here, then run
//
//	make check LAB=02 EXERCISE=1
var answer = struct {
	// Node ex02-short: --node-lease-duration-seconds=20 (its Lease says
	// "valid for 20 s", renewed every 5 s), renews for 6 s, then stops.
	// How many seconds after the Lease's last renewal is it Ready=Unknown?
	// (Within 2.5 s counts.)
	UnknownAfterSeconds float64
	// Node ex02-long: --node-lease-duration-seconds=60 (renewed every 15 s),
	// renews for 20 s. Does it go Ready=Unknown while it is still renewing?
	// "yes" or "no".
	LongLeaseUnknownWhileRenewing string
}{
	UnknownAfterSeconds:           0,
	LongLeaseUnknownWhileRenewing: "",
}

const exerciseGrace = 10 * time.Second

func TestExercise(t *testing.T) {
	testenv.Exercise(t)
	if answer.UnknownAfterSeconds <= 0 {
		t.Fatalf("answer.UnknownAfterSeconds is %g: predict first, a number of seconds (labs/02-node-lease/exercise_test.go)", answer.UnknownAfterSeconds)
	}
	if answer.LongLeaseUnknownWhileRenewing != "yes" && answer.LongLeaseUnknownWhileRenewing != "no" {
		t.Fatalf(`answer.LongLeaseUnknownWhileRenewing is %q: predict first, "yes" or "no" (labs/02-node-lease/exercise_test.go)`, answer.LongLeaseUnknownWhileRenewing)
	}
	cp := testenv.OwnControlPlane(t, exerciseGrace)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t.Setenv("LABS_STATE_DIR", t.TempDir()) // the nodes' credentials
	admin, err := cp.AdminClient()
	if err != nil {
		t.Fatal(err)
	}

	// The long-lease node's Ready condition, watched from before it exists.
	w, err := admin.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=ex02-long"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	var leftTrue []time.Time // when its Ready left True
	go func() {
		ready := false
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*v1.Node)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			c := node.GetCondition(&n.Status, v1.NodeReady)
			if c == nil {
				continue
			}
			now := c.Status == v1.ConditionTrue
			if ready && !now {
				mu.Lock()
				leftTrue = append(leftTrue, time.Now())
				mu.Unlock()
			}
			ready = now
		}
	}()

	lab := func(name string, leaseSeconds int, renewFor time.Duration) (*timeline, string, error) {
		var out bytes.Buffer
		tl, err := run(ctx, options{
			kubeconfig: cp.AdminKubeconfig(), nodeName: name, leaseSeconds: leaseSeconds,
			renewFor: renewFor, resume: false, timeout: 90 * time.Second,
		}, labenv.NewPrinter(&out))
		return tl, out.String(), err
	}
	var short, long *timeline
	var shortOut, longOut string
	var shortErr, longErr error
	var wg sync.WaitGroup
	wg.Go(func() { short, shortOut, shortErr = lab("ex02-short", 20, 6*time.Second) })
	wg.Go(func() { long, longOut, longErr = lab("ex02-long", 60, 20*time.Second) })
	wg.Wait()
	if shortErr != nil || longErr != nil {
		t.Fatalf("the lab failed: %v / %v\nex02-short:\n%s\nex02-long:\n%s", shortErr, longErr, shortOut, longOut)
	}

	measured := short.NotReadyAfter().Seconds()
	if math.Abs(measured-answer.UnknownAfterSeconds) > 2.5 {
		t.Errorf("UnknownAfterSeconds: you predicted %.1f s; ex02-short (a Lease valid for 20 s) was Ready=Unknown %.1f s after its last renewal. Its run:\n%s",
			answer.UnknownAfterSeconds, measured, shortOut)
	} else {
		t.Logf("ex02-short: Ready=Unknown %.1f s after its last renewal, as you predicted (%.1f s)", measured, answer.UnknownAfterSeconds)
	}

	mu.Lock()
	var whileRenewing []time.Time
	for _, at := range leftTrue {
		if at.Before(long.StoppedAt) {
			whileRenewing = append(whileRenewing, at)
		}
	}
	mu.Unlock()
	got := "no"
	if len(whileRenewing) > 0 {
		got = "yes"
	}
	if got != answer.LongLeaseUnknownWhileRenewing {
		t.Errorf("LongLeaseUnknownWhileRenewing: you predicted %q; it was %q: ex02-long's Ready left True %d times before it stopped renewing. Its run:\n%s",
			answer.LongLeaseUnknownWhileRenewing, got, len(whileRenewing), longOut)
	} else {
		t.Logf("ex02-long: Ready left True %d times while renewing every 15 s, as you predicted", len(whileRenewing))
	}
}
