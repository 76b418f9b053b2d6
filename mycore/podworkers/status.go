package podworkers

import (
	"context"
	"time"

	"k8s.io/kubernetes/pkg/kubelet"
)

// podStatus is what the workers know about one pod (upstream's
// podSyncStatus, pod_workers.go:338-424, cut to what we use). Guarded by
// Workers.mu.
type podStatus struct {
	name string // namespace/name, for events and snapshots

	// ctx is reused by syncs until cancelled; cancel is how UpdatePod stops
	// a running sync when a kill arrives.
	ctx    context.Context
	cancel context.CancelFunc

	// updates wakes the pod's goroutine (buffered, 1); nil once the worker
	// has been told to exit.
	updates chan struct{}
	// working: an update is pending or being worked on; syncing: a Syncer
	// method is running right now.
	working, syncing bool
	// pending is the next update the goroutine will take. A newer update
	// replaces it: only the latest state matters (:358-364).
	pending *kubelet.UpdatePodOptions
	// active is what the last sync was given, merged across updates
	// (mergeLastUpdate, :452): the last known pod and mirror pod, the kill
	// options accumulated. Replayed for resyncs and phase changes.
	active *kubelet.UpdatePodOptions

	syncedAt, startedAt, terminatingAt, terminatedAt time.Time
	gracePeriod                                      int64

	notifyTerminated []chan<- struct{}       // KillPodOptions.CompletedCh, closed once terminated
	statusFuncs      []kubelet.PodStatusFunc // KillPodOptions.PodStatusFunc; the last one wins

	startedTerminating bool // the goroutine has seen the kill: no container will start again
	deleted            bool // deleted in the apiserver, or gone from config
	evicted            bool
	finished           bool // SyncTerminatedPod succeeded; the goroutine has exited
	restartRequested   bool // a create for the same UID arrived while terminating
	runtimeOnly        bool // seen only as a runtime pod (no config)
}

func (s *podStatus) terminationRequested() bool { return !s.terminatingAt.IsZero() }
func (s *podStatus) terminated() bool           { return !s.terminatedAt.IsZero() }
func (s *podStatus) started() bool              { return !s.startedAt.IsZero() }

// state is the pod's place in the state machine (WorkType, :436).
func (s *podStatus) state() kubelet.PodWorkerState {
	switch {
	case s.terminated():
		return kubelet.TerminatedPod
	case s.terminationRequested():
		return kubelet.TerminatingPod
	default:
		return kubelet.SyncPod
	}
}

// merge records an update as the latest known state (mergeLastUpdate,
// :452-484): the newest pod wins unless the update carries only a runtime
// pod, a missing mirror pod keeps the last one, and kill options
// accumulate (without channels and funcs, which are kept on the status).
func (s *podStatus) merge(u kubelet.UpdatePodOptions) {
	if s.active == nil {
		s.active = &kubelet.UpdatePodOptions{}
	}
	a := s.active
	if a.Pod == nil || u.RunningPod == nil {
		a.Pod = u.Pod
	}
	a.RunningPod = u.RunningPod
	if u.MirrorPod != nil {
		a.MirrorPod = u.MirrorPod
	}
	a.UpdateType = u.UpdateType
	if k := u.KillPodOptions; k != nil {
		a.KillPodOptions = &kubelet.KillPodOptions{Evict: k.Evict}
		if g := k.PodTerminationGracePeriodSecondsOverride; g != nil {
			v := *g
			a.KillPodOptions.PodTerminationGracePeriodSecondsOverride = &v
		}
	}
}
