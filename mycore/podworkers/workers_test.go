package podworkers

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/kubelet"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/internal/testenv"
)

func TestEffectiveGracePeriod(t *testing.T) {
	i := func(v int64) *int64 { return &v }
	kill := func(v int64) *kubelet.KillPodOptions {
		return &kubelet.KillPodOptions{PodTerminationGracePeriodSecondsOverride: i(v)}
	}
	pod := newPod("p", 30)
	for _, tc := range []struct {
		name      string
		current   int64
		pod       *v1.Pod
		opts      *kubelet.KillPodOptions
		want      int64
		shortened bool
	}{
		{"spec default", 0, pod, nil, 30, false},
		{"graceful delete", 0, deleted(pod, 45), nil, 45, false},
		{"override below the delete", 0, deleted(pod, 30), kill(10), 10, false},
		{"shorter request shortens", 30, pod, kill(10), 10, true},
		{"longer request is ignored", 10, pod, kill(20), 10, false},
		{"longer delete is ignored", 10, deleted(pod, 20), nil, 10, false},
		{"zero becomes one", 0, pod, kill(0), 1, false},
		{"force delete shortens to one", 30, deleted(pod, 0), nil, 1, true},
		{"no spec value", 0, &v1.Pod{}, nil, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, short := EffectiveGracePeriod(tc.current, tc.pod, tc.opts)
			if got != tc.want || short != tc.shortened {
				t.Fatalf("EffectiveGracePeriod(%d) = %d, shortened=%v; want %d, %v", tc.current, got, short, tc.want, tc.shortened)
			}
		})
	}
}

// A whole life: create → SyncPod; delete → SyncTerminatingPod with the
// delete's grace → SyncTerminatedPod → finished; SyncKnownPods forgets it.
func TestLifecycleGracefulDelete(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	var graceSeen int64
	log := func(s string) { mu.Lock(); calls = append(calls, s); mu.Unlock() }
	w, _, rec := start(t, Funcs{
		Pod: func(ctx context.Context, ut kubetypes.SyncPodType, pod, _ *v1.Pod, st *kubecontainer.PodStatus) (bool, func(), error) {
			log("SyncPod " + ut.String())
			return false, nil, nil
		},
		TerminatingPod: func(ctx context.Context, pod *v1.Pod, st *kubecontainer.PodStatus, grace *int64, _ func(*v1.PodStatus)) error {
			mu.Lock()
			graceSeen = *grace
			mu.Unlock()
			log("SyncTerminatingPod")
			return nil
		},
		TerminatedPod: func(ctx context.Context, pod *v1.Pod, st *kubecontainer.PodStatus) error {
			log("SyncTerminatedPod")
			return nil
		},
	})
	pod := newPod("web", 30)
	if !w.CouldHaveRunningContainers(pod.UID) {
		t.Fatal("before SyncKnownPods an unknown pod could be running")
	}
	w.UpdatePod(kubelet.UpdatePodOptions{Pod: pod, UpdateType: kubetypes.SyncPodCreate})
	testenv.PollTrue(t, "SyncPod", patient, func() bool { mu.Lock(); defer mu.Unlock(); return len(calls) == 1 })
	if st := state(t, w, pod.UID); st.State != kubelet.SyncPod || w.IsPodTerminationRequested(pod.UID) {
		t.Fatalf("after create: %+v", st)
	}
	if w.ShouldPodRuntimeBeRemoved(pod.UID) || w.ShouldPodContentBeRemoved(pod.UID) {
		t.Fatal("the garbage collector may not touch a running pod")
	}

	done := make(chan struct{})
	w.UpdatePod(kubelet.UpdatePodOptions{Pod: deleted(pod, 7), UpdateType: kubetypes.SyncPodUpdate,
		KillPodOptions: &kubelet.KillPodOptions{CompletedCh: done}})
	if !w.IsPodTerminationRequested(pod.UID) {
		t.Fatal("a graceful delete must request termination at once")
	}
	waitClosed(t, "the kill's CompletedCh", done)
	if w.CouldHaveRunningContainers(pod.UID) || !w.IsPodKnownTerminated(pod.UID) {
		t.Fatal("CompletedCh closed while containers could still run")
	}
	testenv.PollTrue(t, "finished", patient, func() bool { return state(t, w, pod.UID).Finished })
	// Deleted and terminated: its content may go now, while its object
	// may still be in the apiserver (pod_workers.go:715-724).
	if !w.ShouldPodRuntimeBeRemoved(pod.UID) || !w.ShouldPodContentBeRemoved(pod.UID) {
		t.Fatal("a deleted, terminated pod's runtime and content must be removable")
	}

	mu.Lock()
	want := []string{"SyncPod create", "SyncTerminatingPod", "SyncTerminatedPod"}
	if !slices.Equal(calls, want) || graceSeen != 7 {
		t.Errorf("calls %v grace %d; want %v grace 7", calls, graceSeen, want)
	}
	mu.Unlock()

	// Still desired (in the pod manager): kept. Gone: removed.
	if known := w.SyncKnownPods([]*v1.Pod{pod}); known[pod.UID].State != kubelet.TerminatedPod {
		t.Fatalf("known = %+v", known)
	}
	if known := w.SyncKnownPods(nil); len(known) != 0 {
		t.Fatalf("a finished, deleted pod must be forgotten: %+v", known)
	}
	if _, ok := w.State(pod.UID); ok {
		t.Fatal("State still knows the removed pod")
	}
	if w.CouldHaveRunningContainers(pod.UID) {
		t.Fatal("after SyncKnownPods an unknown pod cannot be running")
	}
	testenv.PollTrue(t, "the removed event", patient, func() bool {
		ev := rec.of(pod.UID)
		return len(ev) > 0 && ev[len(ev)-1].Kind == Removed
	})
	var kinds []string
	for _, e := range rec.of(pod.UID) {
		kinds = append(kinds, string(e.Kind)+":"+e.State.String())
	}
	wantKinds := []string{"started:sync", "sync:sync", "transition:terminating", "sync:terminating",
		"transition:terminated", "sync:terminated", "finished:terminated", "removed:terminated"}
	if !slices.Equal(kinds, wantKinds) {
		t.Errorf("events %v\nwant   %v", kinds, wantKinds)
	}
}

// Updates to one pod are handled in order and never two at once; updates
// that pile up while a sync runs are coalesced, the latest wins.
func TestOrderingPerPod(t *testing.T) {
	const pods, updates = 20, 50
	var running [pods]atomic.Int32
	var mu sync.Mutex
	seen := map[types.UID][]int{}
	w, _, _ := start(t, Funcs{Pod: func(ctx context.Context, _ kubetypes.SyncPodType, pod, _ *v1.Pod, _ *kubecontainer.PodStatus) (bool, func(), error) {
		n, _ := strconv.Atoi(pod.Name[1:])
		if running[n].Add(1) != 1 {
			t.Errorf("two syncs of %s at once", pod.Name)
		}
		time.Sleep(time.Millisecond)
		running[n].Add(-1)
		rv, _ := strconv.Atoi(pod.ResourceVersion)
		mu.Lock()
		seen[pod.UID] = append(seen[pod.UID], rv)
		mu.Unlock()
		return false, nil, nil
	}})
	var wg sync.WaitGroup
	for p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pod := newPod("p"+strconv.Itoa(p), 30)
			for rv := 1; rv <= updates; rv++ {
				w.UpdatePod(kubelet.UpdatePodOptions{Pod: withVersion(pod, rv), UpdateType: kubetypes.SyncPodUpdate})
			}
		}()
	}
	wg.Wait()
	testenv.PollTrue(t, "every pod synced at its last version", patient, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for p := range pods {
			v := seen[types.UID("uid-p"+strconv.Itoa(p))]
			if len(v) == 0 || v[len(v)-1] != updates {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for uid, v := range seen {
		if !slices.IsSorted(v) || len(slices.Compact(slices.Clone(v))) != len(v) {
			t.Errorf("%s synced out of order or twice: %v", uid, v)
		}
		total += len(v)
	}
	t.Logf("%d updates sent, %d synced (the rest coalesced)", pods*updates, total)
}

// blockingSyncPod blocks the first SyncPod until release is closed or its
// context is cancelled, and records what every call saw.
type blockingSyncPod struct {
	started, release chan struct{}
	once             sync.Once
	mu               sync.Mutex
	versions         []string
	cancelled        bool
}

func (b *blockingSyncPod) fn(ctx context.Context, _ kubetypes.SyncPodType, pod, _ *v1.Pod, _ *kubecontainer.PodStatus) (bool, func(), error) {
	b.mu.Lock()
	b.versions = append(b.versions, pod.ResourceVersion)
	b.mu.Unlock()
	first := false
	b.once.Do(func() { first = true })
	if !first {
		return false, nil, nil
	}
	close(b.started)
	select {
	case <-b.release:
		return false, nil, nil
	case <-ctx.Done():
		b.mu.Lock()
		b.cancelled = true
		b.mu.Unlock()
		return false, nil, ctx.Err()
	}
}

func TestUpdateDuringSyncIsCoalesced(t *testing.T) {
	b := &blockingSyncPod{started: make(chan struct{}), release: make(chan struct{})}
	w, _, rec := start(t, Funcs{Pod: b.fn})
	pod := newPod("web", 30)
	w.UpdatePod(kubelet.UpdatePodOptions{Pod: pod, UpdateType: kubetypes.SyncPodCreate})
	waitClosed(t, "the first SyncPod", b.started)
	for rv := 2; rv <= 4; rv++ {
		w.UpdatePod(kubelet.UpdatePodOptions{Pod: withVersion(pod, rv), UpdateType: kubetypes.SyncPodUpdate})
	}
	if st := state(t, w, pod.UID); !st.Syncing || !st.Pending {
		t.Fatalf("during the sync: %+v", st)
	}
	close(b.release)
	testenv.PollTrue(t, "the second SyncPod", patient, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.versions) == 2 })
	time.Sleep(50 * time.Millisecond) // room for a wrong third sync
	b.mu.Lock()
	defer b.mu.Unlock()
	if !slices.Equal(b.versions, []string{"1", "4"}) {
		t.Fatalf("SyncPod saw versions %v, want [1 4]: the pending update is replaced, only the latest runs", b.versions)
	}
	coalesced := 0
	for _, e := range rec.of(pod.UID) {
		if e.Kind == Coalesced {
			coalesced++
		}
	}
	if coalesced != 2 {
		t.Errorf("%d coalesced events, want 2 (v3 replaced v2, v4 replaced v3)", coalesced)
	}
}

func TestDeleteDuringSyncCancelsIt(t *testing.T) {
	b := &blockingSyncPod{started: make(chan struct{}), release: make(chan struct{})}
	defer close(b.release)
	terminating := make(chan int64, 1)
	w, _, rec := start(t, Funcs{
		Pod: b.fn,
		TerminatingPod: func(ctx context.Context, pod *v1.Pod, _ *kubecontainer.PodStatus, grace *int64, _ func(*v1.PodStatus)) error {
			terminating <- *grace
			return nil
		},
	})
	pod := newPod("web", 30)
	w.UpdatePod(kubelet.UpdatePodOptions{Pod: pod, UpdateType: kubetypes.SyncPodCreate})
	waitClosed(t, "the first SyncPod", b.started)
	if w.ShouldPodContainersBeTerminating(pod.UID) {
		t.Fatal("containers must not be terminating before the delete")
	}
	w.UpdatePod(kubelet.UpdatePodOptions{Pod: deleted(pod, 5), UpdateType: kubetypes.SyncPodUpdate})
	select {
	case g := <-terminating:
		if g != 5 {
			t.Errorf("SyncTerminatingPod got grace %d, want 5", g)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("SyncTerminatingPod never ran")
	}
	b.mu.Lock()
	if !b.cancelled || len(b.versions) != 1 {
		t.Errorf("the running SyncPod must be cancelled and not run again: cancelled=%v calls=%v", b.cancelled, b.versions)
	}
	b.mu.Unlock()
	if !w.ShouldPodContainersBeTerminating(pod.UID) {
		t.Error("after SyncTerminatingPod started, containers should be terminating")
	}
	testenv.PollTrue(t, "the cancelled event", patient, func() bool {
		return slices.ContainsFunc(rec.of(pod.UID), func(e Event) bool { return e.Kind == Cancelled })
	})
}

// 30 → 10 → 20 stays 10: a kill can shorten a running SyncTerminatingPod
// (which is cancelled and rerun with the shorter period), never lengthen.
func TestGracePeriodOnlyDecreases(t *testing.T) {
	var mu sync.Mutex
	var graces []int64
	entered := make(chan struct{}, 10)
	w, _, _ := start(t, Funcs{TerminatingPod: func(ctx context.Context, _ *v1.Pod, _ *kubecontainer.PodStatus, grace *int64, _ func(*v1.PodStatus)) error {
		mu.Lock()
		graces = append(graces, *grace)
		mu.Unlock()
		entered <- struct{}{}
		if *grace > 10 {
			<-ctx.Done() // a slow stop, interrupted by the shorter kill
			return ctx.Err()
		}
		return nil
	}})
	pod := newPod("web", 30)
	w.UpdatePod(kubelet.UpdatePodOptions{Pod: pod, UpdateType: kubetypes.SyncPodCreate})
	w.UpdatePod(kubelet.UpdatePodOptions{Pod: pod, UpdateType: kubetypes.SyncPodKill})
	<-entered
	ten, twenty := int64(10), int64(20)
	done := make(chan struct{})
	w.UpdatePod(kubelet.UpdatePodOptions{Pod: pod, UpdateType: kubetypes.SyncPodKill,
		KillPodOptions: &kubelet.KillPodOptions{PodTerminationGracePeriodSecondsOverride: &ten}})
	w.UpdatePod(kubelet.UpdatePodOptions{Pod: pod, UpdateType: kubetypes.SyncPodKill,
		KillPodOptions: &kubelet.KillPodOptions{PodTerminationGracePeriodSecondsOverride: &twenty, CompletedCh: done}})
	waitClosed(t, "termination", done)
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(graces, []int64{30, 10}) {
		t.Fatalf("SyncTerminatingPod grace periods %v, want [30 10]", graces)
	}
	if st := state(t, w, pod.UID); st.GracePeriod != 10 {
		t.Fatalf("grace period %d, want 10", st.GracePeriod)
	}
}

// SyncPod reporting the pod terminal (restartPolicy Never, all exited)
// drives it to terminating and terminated without any update.
func TestTerminalSyncPodTerminates(t *testing.T) {
	terminated := make(chan struct{})
	w, _, _ := start(t, Funcs{
		Pod: func(context.Context, kubetypes.SyncPodType, *v1.Pod, *v1.Pod, *kubecontainer.PodStatus) (bool, func(), error) {
			return true, nil, nil
		},
		TerminatingPod: func(_ context.Context, _ *v1.Pod, _ *kubecontainer.PodStatus, grace *int64, _ func(*v1.PodStatus)) error {
			if grace != nil {
				t.Errorf("no kill, no grace override: got %d", *grace)
			}
			return nil
		},
		TerminatedPod: func(context.Context, *v1.Pod, *kubecontainer.PodStatus) error { close(terminated); return nil },
	})
	pod := newPod("job", 30)
	w.UpdatePod(kubelet.UpdatePodOptions{Pod: pod, UpdateType: kubetypes.SyncPodCreate})
	waitClosed(t, "SyncTerminatedPod", terminated)
	testenv.PollTrue(t, "finished", patient, func() bool { return state(t, w, pod.UID).Finished })
	// Terminated but not deleted (a Job's pod): its sandboxes may go, its
	// containers and logs stay readable (pod_workers.go:704-724).
	if !w.ShouldPodRuntimeBeRemoved(pod.UID) || w.ShouldPodContentBeRemoved(pod.UID) {
		t.Fatal("a terminated pod that was not deleted: runtime removable, content kept")
	}
	// A finished pod ignores updates; a kill for it completes at once.
	done := make(chan struct{})
	w.UpdatePod(kubelet.UpdatePodOptions{Pod: pod, UpdateType: kubetypes.SyncPodKill, KillPodOptions: &kubelet.KillPodOptions{CompletedCh: done}})
	waitClosed(t, "the kill of a finished pod", done)
}

// Every sync waits for the pod cache: nothing runs before the PLEG's first
// relist, and each later sync waits for a relist newer than the last sync.
func TestSyncWaitsForThePodCache(t *testing.T) {
	cache := kubecontainer.NewCache()
	var calls atomic.Int32
	w, err := New(Options{Syncer: Funcs{Pod: func(context.Context, kubetypes.SyncPodType, *v1.Pod, *v1.Pod, *kubecontainer.PodStatus) (bool, func(), error) {
		calls.Add(1)
		return false, nil, nil
	}}, Cache: cache, SyncTick: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	pod := newPod("web", 30)
	w.UpdatePod(kubelet.UpdatePodOptions{Pod: pod, UpdateType: kubetypes.SyncPodCreate})
	time.Sleep(100 * time.Millisecond)
	if n := calls.Load(); n != 0 {
		t.Fatalf("SyncPod ran %d times before the cache had any data", n)
	}
	cache.UpdateTime(time.Now()) // the first relist
	testenv.PollTrue(t, "the first SyncPod", patient, func() bool { return calls.Load() == 1 })

	w.UpdatePod(kubelet.UpdatePodOptions{Pod: pod, UpdateType: kubetypes.SyncPodSync})
	time.Sleep(100 * time.Millisecond)
	if n := calls.Load(); n != 1 {
		t.Fatalf("the second sync ran on a cache older than the first sync (%d calls)", n)
	}
	cache.Set(pod.UID, &kubecontainer.PodStatus{ID: pod.UID}, nil, time.Now()) // the PLEG saw this pod change
	testenv.PollTrue(t, "the second SyncPod", patient, func() bool { return calls.Load() == 2 })
}

// A failing sync is retried after the back-off; a good one resyncs after
// the resync interval.
func TestBackOffAndResync(t *testing.T) {
	var calls atomic.Int32
	var mu sync.Mutex
	var at []time.Time
	w, _, rec := start(t, Funcs{Pod: func(context.Context, kubetypes.SyncPodType, *v1.Pod, *v1.Pod, *kubecontainer.PodStatus) (bool, func(), error) {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		if calls.Add(1) == 1 {
			return false, nil, errors.New("image pull failed")
		}
		return false, nil, nil
	}}, func(o *Options) {
		o.BackOffPeriod = 200 * time.Millisecond
		o.ResyncInterval = 400 * time.Millisecond
	})
	pod := newPod("web", 30)
	w.UpdatePod(kubelet.UpdatePodOptions{Pod: pod, UpdateType: kubetypes.SyncPodCreate})
	testenv.PollTrue(t, "a retry and a resync", patient, func() bool { return calls.Load() >= 3 })
	mu.Lock()
	retry, resync := at[1].Sub(at[0]), at[2].Sub(at[1])
	mu.Unlock()
	// Jitter adds up to 50 %; the lower bounds are what must hold.
	if retry < 200*time.Millisecond || resync < 400*time.Millisecond {
		t.Errorf("retry after %s (back-off 200ms), resync after %s (interval 400ms)", retry, resync)
	}
	t.Logf("retry after %s, resync after %s", retry, resync)
	ev := rec.of(pod.UID)
	if !slices.ContainsFunc(ev, func(e Event) bool { return e.Kind == Retry && e.Err != nil }) {
		t.Error("no retry event")
	}
	if !slices.ContainsFunc(ev, func(e Event) bool { return e.Kind == Sync && e.UpdateType == kubetypes.SyncPodSync }) {
		t.Error("resyncs are sent as SyncPodSync")
	}
}

// A pod only the runtime knows is killed with SyncTerminatingRuntimePod
// and forgotten.
func TestRuntimePodKill(t *testing.T) {
	killed := make(chan types.UID, 1)
	w, _, _ := start(t, Funcs{TerminatingRuntimePod: func(_ context.Context, rp *kubecontainer.Pod) error {
		killed <- rp.ID
		return nil
	}})
	rp := &kubecontainer.Pod{ID: "uid-leftover", Name: "leftover", Namespace: "default"}
	w.UpdatePod(kubelet.UpdatePodOptions{RunningPod: rp, UpdateType: kubetypes.SyncPodSync}) // ignored: only kills
	w.UpdatePod(kubelet.UpdatePodOptions{RunningPod: rp, UpdateType: kubetypes.SyncPodKill})
	select {
	case id := <-killed:
		if id != rp.ID {
			t.Fatalf("killed %s", id)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("SyncTerminatingRuntimePod never ran")
	}
	testenv.PollTrue(t, "the runtime pod forgotten", patient, func() bool { _, ok := w.State(rp.ID); return !ok })
}

// A running pod that vanished from config (SyncKnownPods without it) is
// terminated by its worker with the pod's own grace period.
func TestOrphanIsTerminated(t *testing.T) {
	graces := make(chan *int64, 1)
	synced := make(chan struct{}, 1)
	w, _, _ := start(t, Funcs{
		Pod: func(context.Context, kubetypes.SyncPodType, *v1.Pod, *v1.Pod, *kubecontainer.PodStatus) (bool, func(), error) {
			select {
			case synced <- struct{}{}:
			default:
			}
			return false, nil, nil
		},
		TerminatingPod: func(_ context.Context, _ *v1.Pod, _ *kubecontainer.PodStatus, grace *int64, _ func(*v1.PodStatus)) error {
			graces <- grace
			return nil
		},
	})
	pod := newPod("web", 12)
	w.UpdatePod(kubelet.UpdatePodOptions{Pod: pod, UpdateType: kubetypes.SyncPodCreate})
	<-synced
	known := w.SyncKnownPods(nil)
	if s := known[pod.UID]; !s.Orphan || s.State != kubelet.TerminatingPod {
		t.Fatalf("known = %+v", known)
	}
	select {
	case g := <-graces:
		if g == nil || *g != 12 {
			t.Fatalf("orphan terminated with grace %v, want 12", g)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the orphan was not terminated")
	}
	testenv.PollTrue(t, "finished", patient, func() bool { return state(t, w, pod.UID).Finished })
	// Gone from the config counts as deleted: terminated, all of it may go.
	if !w.ShouldPodRuntimeBeRemoved(pod.UID) || !w.ShouldPodContentBeRemoved(pod.UID) {
		t.Fatal("a terminated orphan's runtime and content must be removable")
	}
	if known := w.SyncKnownPods(nil); len(known) != 0 {
		t.Fatalf("still known: %+v", known)
	}
}

// Stop returns even when workers are blocked in GetNewerThan (no PLEG ever
// ran) or in a sync; goleak in TestMain checks nothing is left.
func TestStopWakesBlockedWorkers(t *testing.T) {
	cache := kubecontainer.NewCache() // nobody ever updates it
	w, err := New(Options{Syncer: Funcs{}, Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		w.UpdatePod(kubelet.UpdatePodOptions{Pod: newPod("p"+strconv.Itoa(i), 30), UpdateType: kubetypes.SyncPodCreate})
	}
	stopped := make(chan struct{})
	go func() { w.Stop(); close(stopped) }()
	waitClosed(t, "Stop", stopped)
	w.Stop() // twice is fine
	w.UpdatePod(kubelet.UpdatePodOptions{Pod: newPod("late", 30), UpdateType: kubetypes.SyncPodCreate})
	if _, ok := w.State("uid-late"); ok {
		t.Fatal("an update after Stop started a worker")
	}
}

func TestNewNeedsSyncerAndCache(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Fatal("New without Syncer and Cache must fail")
	}
}
