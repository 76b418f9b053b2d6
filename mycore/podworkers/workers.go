package podworkers

import (
	"context"
	"errors"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/kubelet"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
	"k8s.io/kubernetes/pkg/kubelet/util/queue"
	"k8s.io/utils/clock"
)

// The kubelet's values.
const (
	// DefaultResyncInterval: a pod that synced fine is synced again after
	// this (plus up to 50 % jitter). The kubelet passes --sync-frequency
	// (kubelet.go:611, :740), whose default is 1 minute.
	DefaultResyncInterval = time.Minute
	// DefaultBackOffPeriod: a failed sync is retried after this (plus
	// jitter); backOffPeriod in kubelet.go:225.
	DefaultBackOffPeriod = 10 * time.Second
	// DefaultSyncTick: how often due resyncs are looked for; the kubelet's
	// syncTicker (kubelet.go:2626) drains its work queue every second.
	DefaultSyncTick = time.Second
)

// jitterFactor is upstream's workerResyncIntervalJitterFactor and
// workerBackOffPeriodJitterFactor (pod_workers.go:325-334).
const jitterFactor = 0.5

// Options configure Workers. Syncer and Cache are required.
type Options struct {
	Syncer Syncer
	// Cache is the pod cache the PLEG writes. Every sync waits on
	// Cache.GetNewerThan; Stop uses Cache.UpdateTime to wake waiters.
	Cache kubecontainer.Cache
	// ResyncInterval, BackOffPeriod, SyncTick: defaults above. Tests and
	// labs shorten them.
	ResyncInterval, BackOffPeriod, SyncTick time.Duration
	// Clock for timestamps and the resync queue (default: the real clock).
	// It must be the PLEG's clock too: a worker's last sync time is
	// compared with the times the PLEG writes into the cache.
	Clock clock.WithTicker
	// OnEvent, if set, is told every step of every worker, in the order
	// the steps happened. It is called on the goroutine that made the step
	// (a worker, or the caller of UpdatePod or SyncKnownPods), one call at
	// a time, without the workers' lock: it may call the query methods,
	// but not UpdatePod, SyncKnownPods or Stop, and it delays the step's
	// goroutine while it runs.
	OnEvent func(Event)
}

// Workers are the pod workers of one node.
type Workers struct {
	opts   Options
	ctx    context.Context // cancelled by Stop; parent of every sync's context
	cancel context.CancelFunc
	queue  queue.WorkQueue // when each pod is due for a resync or retry

	// Event delivery (events.go): queued under mu, numbered by ticket,
	// delivered in order.
	queued      []Event
	ticket      uint64
	deliverMu   sync.Mutex
	deliverCond *sync.Cond
	delivered   uint64

	mu         sync.Mutex
	pods       map[types.UID]*podStatus
	podsSynced bool // SyncKnownPods ran once: every wanted pod has been given to UpdatePod
	stopped    bool

	workers sync.WaitGroup // one per pod goroutine
	loops   sync.WaitGroup // the resync loop
}

// New starts the workers' resync loop; pod goroutines start with UpdatePod.
// Call Stop to end them all.
func New(opts Options) (*Workers, error) {
	if opts.Syncer == nil || opts.Cache == nil {
		return nil, errors.New("podworkers: Options.Syncer and Options.Cache are required")
	}
	if opts.ResyncInterval <= 0 {
		opts.ResyncInterval = DefaultResyncInterval
	}
	if opts.BackOffPeriod <= 0 {
		opts.BackOffPeriod = DefaultBackOffPeriod
	}
	if opts.SyncTick <= 0 {
		opts.SyncTick = DefaultSyncTick
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &Workers{
		opts: opts, ctx: ctx, cancel: cancel,
		queue: queue.NewBasicWorkQueue(opts.Clock),
		pods:  map[types.UID]*podStatus{},
	}
	w.deliverCond = sync.NewCond(&w.deliverMu)
	w.loops.Add(1)
	go func() { defer w.loops.Done(); w.resyncLoop() }()
	return w, nil
}

// UpdatePod hands a pod's new desired state to its worker, starting the
// worker on first sight (UpdatePod, pod_workers.go:761-1005). It never
// blocks on a sync: the update is parked as the pod's pending update,
// replacing any older pending one, and the worker takes it when it is
// free. Either Pod or, for SyncPodKill only, RunningPod must be set.
// Updates after Stop are dropped.
func (w *Workers) UpdatePod(o kubelet.UpdatePodOptions) {
	var uid types.UID
	var ns, name string
	runtimeOnly := false
	switch {
	case o.Pod != nil:
		o.RunningPod = nil // only valid without Pod (:778-782)
		uid, ns, name = o.Pod.UID, o.Pod.Namespace, o.Pod.Name
	case o.RunningPod != nil && o.UpdateType == kubetypes.SyncPodKill:
		// A pod found only in the runtime can only be killed (:769-778).
		uid, ns, name = o.RunningPod.ID, o.RunningPod.Namespace, o.RunningPod.Name
		runtimeOnly = true
	default:
		return
	}

	w.mu.Lock()
	defer w.unlock()
	if w.stopped {
		return
	}
	now := w.opts.Clock.Now()
	s, known := w.pods[uid]
	if !known {
		s = &podStatus{name: ns + "/" + name, syncedAt: now}
		w.pods[uid] = s
	}

	pod := o.Pod
	if runtimeOnly {
		s.runtimeOnly = true
		// Prefer the real spec if we ever had one (:829-851).
		switch {
		case s.pending != nil && s.pending.Pod != nil:
			pod, o.Pod, o.RunningPod = s.pending.Pod, s.pending.Pod, nil
		case s.active != nil && s.active.Pod != nil:
			pod, o.Pod, o.RunningPod = s.active.Pod, s.active.Pod, nil
		default:
			pod = o.RunningPod.ToAPIPod()
		}
	}

	// The same UID created again while terminating (static pods with a
	// fixed UID): remember it, SyncKnownPods lets it restart once the old
	// one finished (:853-864).
	if known && s.terminationRequested() && o.UpdateType == kubetypes.SyncPodCreate {
		s.restartRequested = true
		w.emit(s, uid, Event{Kind: Ignored, UpdateType: o.UpdateType, Reason: "a create for a UID that is still terminating: it may start again once finished"})
		return
	}
	// Once finished, a UID never runs again until SyncKnownPods forgets it
	// (:866-870). Upstream drops a kill's CompletedCh here; KillPodOptions
	// promises it is closed "if the pod has already terminated", so we do.
	if s.finished {
		if o.KillPodOptions != nil && o.KillPodOptions.CompletedCh != nil {
			close(o.KillPodOptions.CompletedCh)
		}
		w.emit(s, uid, Event{Kind: Ignored, UpdateType: o.UpdateType, Reason: o.UpdateType.String() + " ignored: the pod is finished, its worker takes no more updates"})
		return
	}

	// Does this update start termination? (:872-900)
	becameTerminating := ""
	if !s.terminationRequested() {
		switch {
		case runtimeOnly:
			s.deleted, becameTerminating = true, "runtime pod with no config"
		case pod.DeletionTimestamp != nil:
			s.deleted, becameTerminating = true, "deletionTimestamp set (graceful delete)"
		case pod.Status.Phase == v1.PodFailed || pod.Status.Phase == v1.PodSucceeded:
			becameTerminating = "phase is " + string(pod.Status.Phase)
		case o.UpdateType == kubetypes.SyncPodKill:
			becameTerminating = "kill requested"
			if o.KillPodOptions != nil && o.KillPodOptions.Evict {
				s.evicted, becameTerminating = true, "evicted"
			}
		}
		if becameTerminating != "" {
			s.terminatingAt = now
		}
	}

	// Once terminating, every update is a kill and the grace period can
	// only decrease (:902-949).
	shortened := false
	switch {
	case s.terminated():
		if runtimeOnly {
			return // a stale runtime view of a pod we already stopped
		}
		if o.KillPodOptions != nil && o.KillPodOptions.CompletedCh != nil {
			close(o.KillPodOptions.CompletedCh)
		}
		o.KillPodOptions = nil
	case s.terminationRequested():
		kill := kubelet.KillPodOptions{}
		if o.KillPodOptions != nil {
			kill = *o.KillPodOptions // a copy: we write the grace period into it
		}
		if kill.CompletedCh != nil {
			s.notifyTerminated = append(s.notifyTerminated, kill.CompletedCh)
		}
		if kill.PodStatusFunc != nil {
			s.statusFuncs = append(s.statusFuncs, kill.PodStatusFunc)
		}
		grace, short := EffectiveGracePeriod(s.gracePeriod, pod, &kill)
		s.gracePeriod, shortened = grace, short
		// The terminating sync always gets the effective value, never 0.
		kill.PodTerminationGracePeriodSecondsOverride = &grace
		o.KillPodOptions = &kill
	default:
		// Kill options mean nothing to a pod that is not terminating.
		if o.KillPodOptions != nil && o.KillPodOptions.CompletedCh != nil {
			close(o.KillPodOptions.CompletedCh)
		}
		o.KillPodOptions = nil
	}

	if s.updates == nil {
		s.updates = make(chan struct{}, 1)
		w.workers.Add(1)
		go func(updates <-chan struct{}) {
			defer w.workers.Done()
			w.podWorkerLoop(uid, updates)
		}(s.updates)
		w.emit(s, uid, Event{Kind: Started, UpdateType: o.UpdateType, Reason: becameTerminating})
	} else if becameTerminating != "" {
		w.emit(s, uid, Event{Kind: Transition, From: kubelet.SyncPod, UpdateType: o.UpdateType, Reason: becameTerminating})
	} else if shortened {
		w.emit(s, uid, Event{Kind: Transition, From: kubelet.TerminatingPod, UpdateType: o.UpdateType, Reason: "grace period shortened"})
	}

	if s.pending != nil {
		w.emit(s, uid, Event{Kind: Coalesced, UpdateType: o.UpdateType,
			Reason: o.UpdateType.String() + " replaces the pending " + s.pending.UpdateType.String() + " (only the latest update is kept)"})
	}
	s.pending = &o
	s.working = true
	signal(s)

	// A kill, or a shorter grace period, must not wait for a long sync to
	// finish: cancel it; the pending update runs next (:1000-1004).
	if (becameTerminating != "" || shortened) && s.cancel != nil {
		if s.syncing {
			w.emit(s, uid, Event{Kind: Cancelled, UpdateType: o.UpdateType, Reason: "termination requested during a sync"})
		}
		s.cancel()
	}
}

// signal wakes the pod's goroutine without blocking (the channel holds one
// wake-up; more would say nothing new). Call with w.mu held.
func signal(s *podStatus) {
	if s.updates == nil {
		return
	}
	select {
	case s.updates <- struct{}{}:
	default:
	}
}

// requeueLast makes the last synced update pending again, if nothing newer
// is pending (requeueLastPodUpdate, :1757-1772). Used when a pod changes
// phase on its own and for resyncs. Call with w.mu held.
func (w *Workers) requeueLast(s *podStatus, updateType kubetypes.SyncPodType) {
	if s.pending != nil || s.active == nil {
		return
	}
	u := *s.active
	u.UpdateType = updateType
	if s.terminationRequested() && s.gracePeriod > 0 {
		// Unlike upstream, hand the grace period we computed (orphaned pods,
		// removeTerminatedWorker) to the terminating sync.
		g := s.gracePeriod
		kill := kubelet.KillPodOptions{PodTerminationGracePeriodSecondsOverride: &g}
		if u.KillPodOptions != nil {
			kill.Evict = u.KillPodOptions.Evict
		}
		u.KillPodOptions = &kill
	}
	s.pending = &u
	s.working = true
	signal(s)
}

// Stop cancels every running sync and returns once every pod goroutine and
// the resync loop have exited. Kill
// requests still waiting are not completed: their CompletedCh stays open.
func (w *Workers) Stop() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.stopped = true
	for _, s := range w.pods {
		if s.updates != nil {
			close(s.updates) // the goroutine's range loop ends
			s.updates = nil
		}
	}
	w.mu.Unlock()
	w.cancel()

	// A worker may sit in Cache.GetNewerThan, which has no context and
	// returns only when the cache is newer than the worker's last sync.
	// Move the cache's clock forward until they have all left. This tells
	// the cache "all data is fresh as of now", which is harmless: its
	// readers are the workers that are stopping. The last sync was read
	// from Options.Clock: a fake one may stand still or be ahead of the
	// real time, so the cache is set just past the later of the two.
	done := make(chan struct{})
	go func() { w.workers.Wait(); close(done) }()
	for {
		now := w.opts.Clock.Now()
		if real := time.Now(); real.After(now) {
			now = real
		}
		w.opts.Cache.UpdateTime(now.Add(time.Nanosecond))
		select {
		case <-done:
			w.loops.Wait()
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}
