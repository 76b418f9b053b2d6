package podworkers

import (
	"context"
	"time"

	"k8s.io/kubernetes/pkg/kubelet"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

// This file is the build-it stage pod-cache-gate (make stage
// NAME=pod-cache-gate): the gate alone, so a learner's copy can replace it
// for a build without touching the rest of the package.

// podCacheGate is what a pod worker waits on before every sync
// (podWorkerLoop, pkg/kubelet/pod_workers.go:1273-1296, v1.36.3): the
// runtime's state of the pod, as the PLEG wrote it into the pod cache
// (w.opts.Cache), and only a state newer than lastSyncTime — the time the
// worker's previous sync ended (:1322; zero before the first). So a worker never
// acts twice on the same view of the runtime: its first sync waits for the
// PLEG's first relist, each later one for a relist that began after the
// last sync (about one relist period).
//
//   - u.RunningPod set (a kill of a pod known only to the runtime): no
//     status is needed and nothing is waited for; the status is nil.
//   - otherwise: block in the cache's GetNewerThan for u.Pod's UID and
//     lastSyncTime (pkg/kubelet/container/cache.go:108-112: it returns once
//     the pod's entry, or the cache's global timestamp, is newer than the
//     time given). An error from the cache (the PLEG could not inspect the
//     pod) is returned as it is: no sync, a retry after the back-off.
//   - ctx is cancelled by a kill or a shorter grace period arriving
//     (UpdatePod, pod_workers.go:1000-1004), possibly while we waited: then
//     return ctx's error, so the worker does not sync with the update it
//     took, which is stale; the newer one is pending. (Upstream hands the
//     cancelled context to the syncer, which stops at once.)
//
//stage:pod-cache-gate
func (w *Workers) podCacheGate(ctx context.Context, u kubelet.UpdatePodOptions, lastSyncTime time.Time) (*kubecontainer.PodStatus, error) {
	var status *kubecontainer.PodStatus
	if u.RunningPod == nil {
		var err error
		status, err = w.opts.Cache.GetNewerThan(u.Pod.UID, lastSyncTime)
		if err != nil {
			return status, err
		}
	}
	return status, ctx.Err()
}
