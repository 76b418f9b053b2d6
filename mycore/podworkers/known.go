package podworkers

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/kubelet"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
)

// SyncKnownPods is the workers' part of the kubelet's housekeeping
// (HandlePodCleanups, kubelet_pods.go:1238; SyncKnownPods,
// pod_workers.go:1576-1630). desired are all pods the kubelet should
// have (the pod manager's pods). Finished pods that are no longer desired,
// or whose UID was created again, are forgotten; pods that vanished from
// config while running or terminating are driven to the end by their
// worker. It returns the pods still known, with their state; a desired pod
// missing from the result must be given to UpdatePod again (as a create).
func (w *Workers) SyncKnownPods(desired []*v1.Pod) map[types.UID]kubelet.PodWorkerSync {
	want := make(map[types.UID]bool, len(desired))
	for _, p := range desired {
		want[p.UID] = true
	}
	w.mu.Lock()
	defer w.unlock()
	w.podsSynced = true
	known := make(map[types.UID]kubelet.PodWorkerSync, len(w.pods))
	for uid, s := range w.pods {
		orphan := !want[uid]
		if (s.restartRequested || orphan) && w.removeTerminatedWorker(uid, s, orphan) {
			continue
		}
		sync := kubelet.PodWorkerSync{State: s.state(), Orphan: orphan}
		u := s.active
		if u == nil {
			u = s.pending
		}
		if u != nil && u.Pod != nil {
			sync.HasConfig = true
			sync.Static = kubetypes.IsStaticPod(u.Pod)
		}
		known[uid] = sync
	}
	return known
}

// removeTerminatedWorker forgets a finished pod, so its UID could run
// again and its memory is freed; a pod not finished yet is instead pushed
// towards the end (removeTerminatedWorker, :1639-1693). Reports whether
// the pod was forgotten. Call with w.mu held.
func (w *Workers) removeTerminatedWorker(uid types.UID, s *podStatus, orphan bool) bool {
	if !s.finished {
		if !orphan {
			return false // still wanted and still going: wait
		}
		// Gone from config: nobody else will send updates, the worker must
		// finish the pod on its own.
		s.deleted = true
		switch {
		case !s.started() && !s.runtimeOnly:
			// Never synced, so nothing can run: forget it now; its
			// goroutine finds no record and exits.
		case !s.terminationRequested():
			s.terminatingAt = w.opts.Clock.Now()
			s.gracePeriod = 1
			if s.active != nil && s.active.Pod != nil {
				s.gracePeriod, _ = EffectiveGracePeriod(0, s.active.Pod, nil)
			}
			w.emit(s, uid, Event{Kind: Transition, From: kubelet.SyncPod, Reason: "no longer in config"})
			w.requeueLast(s, kubetypes.SyncPodKill)
			return false
		default:
			w.requeueLast(s, kubetypes.SyncPodKill)
			return false
		}
	}
	reason := "finished and no longer in config"
	if s.restartRequested {
		reason = "finished; the same UID was created again and may start"
	}
	w.emit(s, uid, Event{Kind: Removed, Reason: reason})
	delete(w.pods, uid)
	w.closeUpdates(s)
	return true
}
