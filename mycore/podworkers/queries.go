package podworkers

import (
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/kubelet"
)

// The questions the rest of the kubelet asks the pod workers
// (pod_workers.go:648-742). Before the first SyncKnownPods the workers may
// not have seen every pod yet, so an unknown pod "could" still run.

// IsPodKnownTerminated: SyncTerminatingPod succeeded for this pod.
func (w *Workers) IsPodKnownTerminated(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.pods[uid]
	return ok && s.terminated()
}

// CouldHaveRunningContainers: true from the first sight of the pod until
// SyncTerminatingPod succeeded; for unknown pods, until SyncKnownPods ran.
func (w *Workers) CouldHaveRunningContainers(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.pods[uid]; ok {
		return !s.terminated()
	}
	return !w.podsSynced
}

// ShouldPodBeFinished: SyncTerminatedPod succeeded (or, after
// SyncKnownPods, the pod is unknown).
func (w *Workers) ShouldPodBeFinished(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.pods[uid]; ok {
		return s.finished
	}
	return w.podsSynced
}

// ShouldPodRuntimeBeRemoved: the garbage collector may remove the pod's
// sandboxes once SyncTerminatingPod succeeded — nothing runs in them
// (pod_workers.go:704-713).
func (w *Workers) ShouldPodRuntimeBeRemoved(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.pods[uid]; ok {
		return s.terminated()
	}
	return w.podsSynced
}

// ShouldPodContentBeRemoved: the pod's dead containers and logs may go
// once it was evicted, or deleted and terminated (:715-724) — not when its
// object leaves the apiserver, which may come much later (a finalizer) or
// never (the node lost its connection).
func (w *Workers) ShouldPodContentBeRemoved(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.pods[uid]; ok {
		return s.evicted || s.deleted && s.terminated()
	}
	return w.podsSynced
}

// IsPodTerminationRequested: a kill, a delete, or a terminal phase was
// seen, though containers may still be starting.
func (w *Workers) IsPodTerminationRequested(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.pods[uid]
	return ok && s.terminationRequested()
}

// ShouldPodContainersBeTerminating: the worker itself has seen the
// termination, so SyncPod will not run again and no container will start.
func (w *Workers) ShouldPodContainersBeTerminating(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.pods[uid]; ok {
		return s.startedTerminating
	}
	return w.podsSynced
}

// PodState is a snapshot of one pod's worker, for printing.
type PodState struct {
	UID   types.UID
	Pod   string // namespace/name
	State kubelet.PodWorkerState
	// GracePeriod in seconds once termination was requested.
	GracePeriod int64
	// Working: an update is pending or being synced; Syncing: a Syncer
	// method runs now; Pending: an update waits for the worker.
	Working, Syncing, Pending bool
	// Finished: SyncTerminatedPod succeeded, the goroutine has exited.
	Finished, Deleted, Evicted bool
	// LastUpdate is the update type of the last update synced.
	LastUpdate                                       string
	SyncedAt, StartedAt, TerminatingAt, TerminatedAt time.Time
}

// State returns one pod's worker, if known.
func (w *Workers) State(uid types.UID) (PodState, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.pods[uid]
	if !ok {
		return PodState{}, false
	}
	return snapshot(uid, s), true
}

// Snapshot returns every known pod's worker, sorted by namespace/name.
func (w *Workers) Snapshot() []PodState {
	w.mu.Lock()
	out := make([]PodState, 0, len(w.pods))
	for uid, s := range w.pods {
		out = append(out, snapshot(uid, s))
	}
	w.mu.Unlock()
	slices.SortFunc(out, func(a, b PodState) int {
		if c := strings.Compare(a.Pod, b.Pod); c != 0 {
			return c
		}
		return strings.Compare(string(a.UID), string(b.UID))
	})
	return out
}

func snapshot(uid types.UID, s *podStatus) PodState {
	st := PodState{
		UID: uid, Pod: s.name, State: s.state(),
		Working: s.working, Syncing: s.syncing, Pending: s.pending != nil,
		Finished: s.finished, Deleted: s.deleted, Evicted: s.evicted,
		SyncedAt: s.syncedAt, StartedAt: s.startedAt, TerminatingAt: s.terminatingAt, TerminatedAt: s.terminatedAt,
	}
	if s.terminationRequested() {
		st.GracePeriod = s.gracePeriod
	}
	if s.active != nil {
		st.LastUpdate = s.active.UpdateType.String()
	}
	return st
}
