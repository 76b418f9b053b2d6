package podworkers

import (
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/kubelet"
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
	done := make([]chan struct{}, n)
	for i, p := range pods {
		done[i] = make(chan struct{})
		w.UpdatePod(kubelet.UpdatePodOptions{Pod: p, UpdateType: kubetypes.SyncPodKill,
			KillPodOptions: &kubelet.KillPodOptions{CompletedCh: done[i]}})
	}
	for _, ch := range done {
		waitClosed(tb, "a kill", ch)
	}
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
