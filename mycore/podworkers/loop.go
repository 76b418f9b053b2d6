package podworkers

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/kubernetes/pkg/kubelet"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
)

// podWorkerLoop is one pod's goroutine (podWorkerLoop, pod_workers.go:
// 1245-1377): take the pending update, wait until the pod cache is newer
// than our last sync, run the Syncer method of the pod's state, then
// decide what comes next. It returns when the pod is finished or the
// workers stop.
func (w *Workers) podWorkerLoop(uid types.UID, updates <-chan struct{}) {
	var lastSyncTime time.Time
	for range updates {
		ctx, work, u, ok := w.startPodSync(uid)
		if !ok {
			continue
		}

		var (
			status     *kubecontainer.PodStatus
			err        error
			isTerminal bool
			waited     time.Duration
		)
		// The gate (cache_gate.go): wait until the pod cache holds a
		// runtime state newer than our last sync.
		start := time.Now()
		status, err = w.podCacheGate(ctx, u, lastSyncTime)
		if u.RunningPod == nil {
			waited = time.Since(start)
		}
		if w.ctx.Err() != nil {
			return // Stop woke us up
		}
		if err == nil {
			w.emitSync(uid, work, u, waited)
			var postSync func()
			switch work {
			case kubelet.TerminatedPod:
				err = w.opts.Syncer.SyncTerminatedPod(ctx, u.Pod, status)
			case kubelet.TerminatingPod:
				var grace *int64
				if u.KillPodOptions != nil {
					grace = u.KillPodOptions.PodTerminationGracePeriodSecondsOverride
				}
				statusFn := w.acknowledgeTerminating(uid)
				if u.RunningPod != nil {
					err = w.opts.Syncer.SyncTerminatingRuntimePod(ctx, u.RunningPod)
				} else {
					err = w.opts.Syncer.SyncTerminatingPod(ctx, u.Pod, status, grace, statusFn)
				}
			default:
				isTerminal, postSync, err = w.opts.Syncer.SyncPod(ctx, u.UpdateType, u.Pod, u.MirrorPod, status)
			}
			lastSyncTime = w.opts.Clock.Now()
			if postSync != nil {
				postSync()
			}
		}

		phaseTransition := false
		switch {
		case errors.Is(err, context.Canceled):
			if w.ctx.Err() != nil {
				return // stopping
			}
			// Cancelled by a kill: its update is already pending.
		case err != nil:
			// retried after a back-off below
		case work == kubelet.TerminatedPod:
			w.completeTerminated(uid)
			return
		case work == kubelet.TerminatingPod && u.RunningPod != nil:
			w.completeTerminatingRuntimePod(uid)
			return
		case work == kubelet.TerminatingPod:
			w.completeTerminating(uid)
			phaseTransition = true
		case isTerminal:
			w.completeSync(uid)
			phaseTransition = true
		}
		w.completeWork(uid, phaseTransition, err)
	}
}

// startPodSync takes the pending update (startPodSync, :1132-1223). The
// update becomes the pod's active one, visible to other components, and
// the sync gets a context that UpdatePod can cancel. ok is false when
// there is nothing to do.
func (w *Workers) startPodSync(uid types.UID) (ctx context.Context, work kubelet.PodWorkerState, u kubelet.UpdatePodOptions, ok bool) {
	w.mu.Lock()
	defer w.unlock()
	s, known := w.pods[uid]
	if !known || w.stopped {
		return nil, 0, u, false
	}
	if s.pending == nil { // a wake-up with nothing to do
		s.working = false
		return nil, 0, u, false
	}
	work, u = s.state(), *s.pending
	s.pending = nil
	select { // drop a wake-up for the update we are taking now
	case <-s.updates:
	default:
	}
	if s.ctx == nil || s.ctx.Err() != nil {
		s.ctx, s.cancel = context.WithCancel(w.ctx)
	}
	if !s.started() {
		s.startedAt = w.opts.Clock.Now()
	}
	s.merge(u)
	s.syncing = true
	return s.ctx, work, u, true
}

// acknowledgeTerminating records that the worker saw the termination, so
// no container will be started again, and returns the latest status
// function of the kill requests (:1382-1400).
func (w *Workers) acknowledgeTerminating(uid types.UID) kubelet.PodStatusFunc {
	w.mu.Lock()
	defer w.unlock()
	s, ok := w.pods[uid]
	if !ok {
		return nil
	}
	if s.terminationRequested() {
		s.startedTerminating = true
	}
	if n := len(s.statusFuncs); n > 0 {
		return s.statusFuncs[n-1]
	}
	return nil
}

// completeSync: SyncPod said the pod is terminal (every container exited
// and the restart policy keeps them down): go to terminating now
// (completeSync, :1406-1429).
func (w *Workers) completeSync(uid types.UID) {
	w.mu.Lock()
	defer w.unlock()
	s, ok := w.pods[uid]
	if !ok {
		return
	}
	if s.terminatingAt.IsZero() {
		s.terminatingAt = w.opts.Clock.Now()
	}
	s.startedTerminating = true
	w.emit(s, uid, Event{Kind: Transition, From: kubelet.SyncPod, Reason: "SyncPod reported the pod terminal"})
	w.requeueLast(s, s.active.UpdateType)
}

// completeTerminating: every container is stopped. Kill requests are
// complete; go to terminated now (completeTerminating, :1435-1460).
func (w *Workers) completeTerminating(uid types.UID) {
	w.mu.Lock()
	defer w.unlock()
	s, ok := w.pods[uid]
	if !ok {
		return
	}
	s.terminatedAt = w.opts.Clock.Now()
	for _, ch := range s.notifyTerminated {
		close(ch)
	}
	s.notifyTerminated, s.statusFuncs = nil, nil
	w.emit(s, uid, Event{Kind: Transition, From: kubelet.TerminatingPod, Reason: "SyncTerminatingPod succeeded: no container runs"})
	w.requeueLast(s, s.active.UpdateType)
}

// completeTerminatingRuntimePod: a pod known only to the runtime is
// stopped; nothing else to do, forget it (:1466-1492).
func (w *Workers) completeTerminatingRuntimePod(uid types.UID) {
	w.mu.Lock()
	defer w.unlock()
	s, ok := w.pods[uid]
	if !ok {
		return
	}
	s.terminatedAt = w.opts.Clock.Now()
	s.finished, s.working, s.syncing = true, false, false
	w.closeUpdates(s)
	w.emit(s, uid, Event{Kind: Finished, Reason: "runtime pod stopped"})
	delete(w.pods, uid)
}

// completeTerminated: SyncTerminatedPod succeeded; the pod is finished and
// its goroutine exits (completeTerminated, :1496-1520). The record stays
// until SyncKnownPods sees the pod is no longer wanted.
func (w *Workers) completeTerminated(uid types.UID) {
	w.mu.Lock()
	defer w.unlock()
	s, ok := w.pods[uid]
	if !ok {
		return
	}
	s.finished, s.working, s.syncing = true, false, false
	w.closeUpdates(s)
	w.emit(s, uid, Event{Kind: Finished, Reason: "SyncTerminatedPod succeeded"})
}

func (w *Workers) closeUpdates(s *podStatus) {
	if s.updates != nil {
		close(s.updates)
		s.updates = nil
	}
}

// completeWork schedules the pod's next sync (completeWork, :1524-1566):
// after a phase change the next phase is already pending; after success a
// resync in ResyncInterval; after an error a retry in BackOffPeriod (or
// when the error's back-off expires, as for CrashLoopBackOff), both with
// 50 % jitter. Then, if an update arrived meanwhile, it runs at once.
//
// Upstream also enqueues a phase change with delay 0 as a safety net for
// its sync loop; our queue would turn that into a second, duplicate sync.
// Upstream's shorter back-off for "network not ready" is left out.
func (w *Workers) completeWork(uid types.UID, phaseTransition bool, err error) {
	var delay time.Duration
	switch {
	case phaseTransition:
	case err == nil:
		delay = wait.Jitter(w.opts.ResyncInterval, jitterFactor)
	default:
		backoff := w.opts.BackOffPeriod
		if at, ok := kubecontainer.MinBackoffExpiration(err); ok {
			backoff = at.Sub(w.opts.Clock.Now())
		}
		backoff = max(0, min(backoff, w.opts.ResyncInterval))
		delay = wait.Jitter(backoff, jitterFactor)
	}
	if !phaseTransition {
		w.queue.Enqueue(uid, delay)
	}

	w.mu.Lock()
	defer w.unlock()
	s, ok := w.pods[uid]
	if !ok {
		return
	}
	s.syncing = false
	if err != nil && !errors.Is(err, context.Canceled) {
		w.emit(s, uid, Event{Kind: Retry, Delay: delay, Err: err})
	}
	if s.pending != nil {
		signal(s)
	} else {
		s.working = false
	}
}

// resyncLoop is the part of the kubelet's sync loop that drains the work
// queue (syncLoopIteration's syncCh case, kubelet.go:2750-2757, and
// getPodsToSync, :2539): every SyncTick, each pod whose resync or retry is
// due gets its last update again, as a SyncPodSync.
func (w *Workers) resyncLoop() {
	t := w.opts.Clock.NewTicker(w.opts.SyncTick)
	defer t.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-t.C():
		}
		due := w.queue.GetWork()
		if len(due) == 0 {
			continue
		}
		w.mu.Lock()
		for _, uid := range due {
			if s, ok := w.pods[uid]; ok && !s.finished && !w.stopped {
				w.requeueLast(s, kubetypes.SyncPodSync)
			}
		}
		w.unlock()
	}
}
