package benchkit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/util/flowcontrol"

	"kubelet-labs/mycore/fleet"
)

// fakeKubelet stands in for the tool under test: every pod of ns ("": of
// every namespace) it finds it reports Running, and Ready too if ready,
// until ctx ends.
func fakeKubelet(ctx context.Context, c kubernetes.Interface, ns string, ready bool) (wait func()) {
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err == nil {
				for _, p := range pods.Items {
					if p.Status.Phase == v1.PodRunning {
						continue
					}
					p.Status.Phase = v1.PodRunning
					if ready {
						p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
					}
					_, _ = c.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, &p, metav1.UpdateOptions{})
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return wg.Wait
}

// testPods are n pods in ns, every other one with a readiness probe.
func testPods(ns string, n int) []*v1.Pod {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d", i), Namespace: ns},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "busybox"}}}}
		if i%2 == 0 {
			pods[i].Spec.Containers[0].ReadinessProbe = &v1.Probe{}
		}
	}
	return pods
}

func testDriver(c kubernetes.Interface) *Driver {
	return &Driver{Client: c, Calls: fleet.NewCalls(), limiter: flowcontrol.NewFakeAlwaysRateLimiter(), workers: 3}
}

// TestDriverRunPods: every pod is created, seen Running and Ready, and,
// once the counters were read (AtAllUp, before any delete), deleted and
// seen gone; Ready latencies are those of the pods with a probe only.
func TestDriverRunPods(t *testing.T) {
	const ns, n = "bench", 6
	c := fake.NewClientset()
	ctx, cancel := context.WithCancel(t.Context())
	defer fakeKubelet(ctx, c, ns, true)()
	defer cancel()
	d := testDriver(c)
	atAllUp := 0
	pods, err := d.RunPods(ctx, PodRun{Namespace: ns, Pods: testPods(ns, n), Ready: true, Timeout: time.Minute,
		Problem: func() error { return nil }, Logf: t.Logf,
		AtAllUp: func() {
			atAllUp++
			if l, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != n {
				t.Errorf("at all up: %v pods (%v), want all %d: none deleted yet", len(l.Items), err, n)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if atAllUp != 1 {
		t.Errorf("AtAllUp ran %d times, want once", atAllUp)
	}
	if running, ready, gone := pods.Counts(); running != n || ready != n || gone != n {
		t.Errorf("seen %d Running, %d Ready, %d gone; want %d each", running, ready, gone, n)
	}
	running, ready, gone := pods.Latencies()
	if len(running) != n || len(ready) != n/2 || len(gone) != n {
		t.Errorf("latencies: %d Running, %d Ready, %d gone; want %d, %d (the probed pods), %d", len(running), len(ready), len(gone), n, n/2, n)
	}
	if !(!pods.CreateStart.After(pods.AllUp) && !pods.AllUp.After(pods.DeleteStart) && !pods.DeleteStart.After(pods.AllGone)) || pods.LastRunning().IsZero() {
		t.Errorf("times out of order: %+v", pods)
	}
	if l, _ := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); len(l.Items) != 0 {
		t.Errorf("%d pods left", len(l.Items))
	}
}

// TestDriverRunPodsWaitsForReady: with Ready, pods that run but are never
// Ready are not up, and the timeout says how many were; without, Running
// is enough. A problem with the tool stops the wait at once, in its words.
func TestDriverRunPodsWaitsForReady(t *testing.T) {
	const n = 4
	c := fake.NewClientset()
	ctx, cancel := context.WithCancel(t.Context())
	defer fakeKubelet(ctx, c, "", false)()
	defer cancel()
	d := testDriver(c)
	run := func(ns string, ready bool, timeout time.Duration, problem error) error {
		_, err := d.RunPods(ctx, PodRun{Namespace: ns, Pods: testPods(ns, n), Ready: ready, Timeout: timeout,
			Problem: func() error { return problem }, Logf: t.Logf})
		return err
	}
	if err := run("never-ready", true, 300*time.Millisecond, nil); err == nil || !strings.HasPrefix(err.Error(), "pods: timed out after 300ms: ") || !strings.HasSuffix(err.Error(), " 0 Ready") {
		t.Errorf("never Ready: %v, want a timeout that counts 0 Ready", err)
	}
	if err := run("running", false, time.Minute, nil); err != nil {
		t.Errorf("without Ready: %v", err)
	}
	if err := run("problem", true, time.Minute, errors.New("the tool exited")); err == nil || err.Error() != "pods: the tool exited" {
		t.Errorf("a problem: %v, want %q", err, "pods: the tool exited")
	}
}

// TestRoundsPercentile: the value at rank p×n, rounded; 0 for none.
func TestRoundsPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	for _, c := range []struct {
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{nil, 0.5, 0},
		{ms(7), 0.99, 7 * time.Millisecond},
		{ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.99, 10 * time.Millisecond},
		{ms(1, 2, 3), 0, 1 * time.Millisecond},
	} {
		if got := Percentile(c.sorted, c.p); got != c.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", c.sorted, c.p, got, c.want)
		}
	}
}
