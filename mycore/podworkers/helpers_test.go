package podworkers

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

// klog starts its flush daemon when package kubelet is imported; it is
// not ours and lives for the whole process.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"))
}

// fakePLEG does what the PLEG does for the gate: after every relist it
// moves the cache's timestamp to now (GenericPLEG.Relist, pleg/generic.go).
func fakePLEG(t testing.TB, cache kubecontainer.Cache, period time.Duration) {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			cache.UpdateTime(time.Now())
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
}

// recorder collects events.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) add(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) of(uid types.UID) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, e := range r.events {
		if e.UID == uid {
			out = append(out, e)
		}
	}
	return out
}

// start builds workers with short intervals and a running fake PLEG; they
// are stopped when the test ends.
func start(t testing.TB, s Syncer, tweak ...func(*Options)) (*Workers, kubecontainer.Cache, *recorder) {
	t.Helper()
	cache := kubecontainer.NewCache()
	rec := &recorder{}
	opts := Options{
		Syncer: s, Cache: cache,
		ResyncInterval: time.Hour, BackOffPeriod: 50 * time.Millisecond, SyncTick: 10 * time.Millisecond,
		OnEvent: rec.add,
	}
	for _, f := range tweak {
		f(&opts)
	}
	w, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop) // runs before the PLEG stops: Stop must not need it
	fakePLEG(t, cache, 5*time.Millisecond)
	return w, cache, rec
}

func newPod(name string, grace int64) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), ResourceVersion: "1"},
		Spec: v1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []v1.Container{{Name: "c", Image: "busybox"}},
		},
	}
}

// deleted is pod after a graceful delete with grace seconds.
func deleted(pod *v1.Pod, grace int64) *v1.Pod {
	p := pod.DeepCopy()
	now := metav1.Now()
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &grace
	return p
}

func withVersion(pod *v1.Pod, rv int) *v1.Pod {
	p := pod.DeepCopy()
	p.ResourceVersion = fmt.Sprint(rv)
	return p
}

// patient bounds every wait for a worker (generous: tests share 2 cores).
const patient = 30 * time.Second

// waitClosed waits for a channel to be closed.
func waitClosed(t testing.TB, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func state(t testing.TB, w *Workers, uid types.UID) PodState {
	t.Helper()
	st, ok := w.State(uid)
	if !ok {
		t.Fatalf("pod %s unknown to the workers", uid)
	}
	return st
}
