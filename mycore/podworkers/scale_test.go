package podworkers

import (
	"context"
	"runtime"
	"runtime/metrics"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/kubelet"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/internal/testenv"
)

// thousandPods creates n pods, waits until each has been synced, kills
// them all and waits until each kill completed (containers stopped). The
// PLEG is a fake that relists every 5 ms, so this measures the workers,
// not a runtime.
func thousandPods(tb testing.TB, w *Workers, n int, prefix string) (created, killed time.Duration) {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = newPod(prefix+strconv.Itoa(i), 30)
	}
	start := time.Now()
	for _, p := range pods {
		w.UpdatePod(kubelet.UpdatePodOptions{Pod: p, UpdateType: kubetypes.SyncPodCreate})
	}
	// Checked every millisecond: at testenv.Poll's 50 ms the rates below
	// would measure the poll, not the workers.
	testenv.PollEvery(tb, "every pod synced", patient, time.Millisecond, func() (bool, error) {
		for _, p := range pods {
			if st, ok := w.State(p.UID); !ok || st.StartedAt.IsZero() || st.Working {
				return false, nil
			}
		}
		return true, nil
	})
	created = time.Since(start)

	start = time.Now()
	killAll(tb, w, pods)
	testenv.PollEvery(tb, "every pod finished", patient, time.Millisecond, func() (bool, error) {
		for _, p := range pods {
			if st, ok := w.State(p.UID); !ok || !st.Finished {
				return false, nil
			}
		}
		return true, nil
	})
	killed = time.Since(start)
	if known := w.SyncKnownPods(nil); len(known) != 0 {
		tb.Fatalf("%d workers left after SyncKnownPods", len(known))
	}
	return created, killed
}

// killAll kills every pod and waits until each kill has completed.
func killAll(tb testing.TB, w *Workers, pods []*v1.Pod) {
	done := make([]chan struct{}, len(pods))
	for i, p := range pods {
		done[i] = make(chan struct{})
		w.UpdatePod(kubelet.UpdatePodOptions{Pod: p, UpdateType: kubetypes.SyncPodKill,
			KillPodOptions: &kubelet.KillPodOptions{CompletedCh: done[i]}})
	}
	for _, ch := range done {
		waitClosed(tb, "a kill", ch)
	}
}

func TestThousandPods(t *testing.T) {
	const n = 1000
	w, _, _ := start(t, Funcs{}, func(o *Options) { o.OnEvent = nil })
	created, killed := thousandPods(t, w, n, "p")
	t.Logf("%d pods: created and synced in %s (%.0f pods/s), killed to finished in %s (%.0f pods/s)",
		n, created.Round(time.Millisecond), n/created.Seconds(), killed.Round(time.Millisecond), n/killed.Seconds())
}

// BenchmarkThousandPods reports pods/s through the whole life (create,
// sync, kill, terminating, terminated) of 1,000 pods.
func BenchmarkThousandPods(b *testing.B) {
	const n = 1000
	w, _, _ := start(b, Funcs{}, func(o *Options) { o.OnEvent = nil })
	b.ResetTimer()
	var total time.Duration
	for i := range b.N {
		c, k := thousandPods(b, w, n, "b"+strconv.Itoa(i)+"-")
		total += c + k
	}
	b.ReportMetric(float64(n*b.N)/total.Seconds(), "pods/s")
}

// deepSync uses about 20 KiB of stack, as a real sync does (CRI calls,
// the status manager's reflect-based equality), so the worker's stack
// grows before it parks.
//
//go:noinline
func deepSync(depth int) int {
	var frame [256]byte
	frame[depth%len(frame)] = byte(depth)
	if depth == 0 {
		return int(frame[0])
	}
	return deepSync(depth-1) + int(frame[depth%len(frame)])
}

// BenchmarkIdleWorkerStacks reports the stack an idle pod worker keeps
// once its sync has gone deep and the collector has had its chances
// (lab 18's README, fleet mode's memory): Go halves a stack at a
// collection only when less than a quarter of it is in use
// (runtime/stack.go, shrinkstack), so a parked worker ends at the
// smallest power of two four times what it uses.
func BenchmarkIdleWorkerStacks(b *testing.B) {
	const n = 10000
	stacks := func() uint64 {
		s := []metrics.Sample{{Name: "/memory/classes/heap/stacks:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	w, _, _ := start(b, Funcs{Pod: func(context.Context, kubetypes.SyncPodType, *v1.Pod, *v1.Pod, *kubecontainer.PodStatus) (bool, func(), error) {
		deepSync(60)
		return false, nil, nil
	}}, func(o *Options) { o.OnEvent = nil })
	var perWorker float64
	for i := range b.N {
		runtime.GC()
		before := stacks()
		pods := make([]*v1.Pod, n)
		for j := range pods {
			pods[j] = newPod("s"+strconv.Itoa(i)+"-"+strconv.Itoa(j), 30)
			w.UpdatePod(kubelet.UpdatePodOptions{Pod: pods[j], UpdateType: kubetypes.SyncPodCreate})
		}
		testenv.PollEvery(b, "every pod synced", patient, 10*time.Millisecond, func() (bool, error) {
			for _, p := range pods {
				if st, ok := w.State(p.UID); !ok || st.StartedAt.IsZero() || st.Working {
					return false, nil
				}
			}
			return true, nil
		})
		for range 6 {
			runtime.GC()
		}
		perWorker = float64(stacks()-before) / 1024 / n
		killAll(b, w, pods)
		w.SyncKnownPods(nil)
	}
	b.ReportMetric(perWorker, "KiB-stack/idle-worker")
}
