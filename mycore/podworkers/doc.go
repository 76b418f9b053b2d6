// Package podworkers is our kubelet's pod workers: one goroutine per pod
// that drives the pod through three states and never runs two syncs of the
// same pod at once.
//
//	SyncPod ──(deleted, terminal phase, kill, or SyncPod says "terminal")──▶
//	TerminatingPod ──(SyncTerminatingPod succeeded)──▶ TerminatedPod
//	──(SyncTerminatedPod succeeded)──▶ finished: the goroutine exits
//
// It is a compact rewrite of the kubelet's podWorkers
// (pkg/kubelet/pod_workers.go, Kubernetes v1.36.3), which is unexported.
// Line numbers in comments refer to that file at v1.36.3 unless another
// file is named. The shapes callers see are upstream's own, imported from
// package kubelet: UpdatePodOptions, KillPodOptions, PodWorkerState and
// PodWorkerSync; the Syncer interface has upstream's four methods with
// their exact signatures (:265-286), so a real syncer plugs in unchanged.
//
// What it keeps from upstream:
//   - UpdatePod coalesces: only the latest pending update is kept
//     (pendingUpdate, :358-364); the worker never promises to see every
//     intermediate state, only the most recent one.
//   - A pod that is terminating accepts only kills, and its grace period
//     only ever decreases (calculateEffectiveGracePeriod, :1009).
//   - A running sync is cancelled through its context when termination is
//     requested, or the grace period shortened, during it (:1000-1004).
//   - Every sync first waits on the pod cache, GetNewerThan(uid,
//     lastSyncTime) (the switch at :1273-1296; ours: podCacheGate,
//     cache_gate.go): the worker acts only on a runtime state newer than
//     its own last action, which the PLEG writes.
//   - After a sync: a phase change runs the next phase at once; an error
//     retries after a back-off; success resyncs after a resync interval
//     (completeWork, :1524), both with upstream's 50 % jitter.
//   - SyncKnownPods forgets finished pods that are no longer desired, and
//     takes over terminating pods that vanished from config
//     (removeTerminatedWorker, :1639).
//
// What it leaves out: static pods with the same full name starting in
// order (allowPodStart, :1046), in-place resize, metrics and events.
//
// Two things differ on purpose. Upstream's resync is a work queue the
// kubelet's sync loop drains every second (kubelet.go:2539-2561, :2626, :2750-2757); here
// the workers drain it themselves, so a program without a sync loop still
// gets retries. And upstream's workers never stop; Stop here cancels every
// sync and returns when every goroutine has exited. GetNewerThan blocks
// with no context, so Stop keeps moving the cache's clock forward
// (UpdateTime) until the blocked workers wake up and leave.
package podworkers
