package mykubelet

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	kubeletpkg "k8s.io/kubernetes/pkg/kubelet"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/mycore/kuberuntime"
)

// handlePodCleanups is HandlePodCleanups (kubelet_pods.go:1205), run every
// housekeeping period:
//   - the workers learn which pods are still wanted: finished ones that are
//     not are forgotten, running ones that are not are terminated;
//   - a pod the runtime runs but nobody wants any more (its object was
//     deleted while this node was down, or its containers were started by
//     someone else with our labels) is killed as a runtime-only pod;
//   - the folders (and volumes) of pods the node neither has nor runs go;
//   - mirror pods whose static pod is gone are deleted;
//   - statuses and reasons of forgotten pods are dropped.
//
// It runs only once every pod source has delivered its first list.
func (k *Kubelet) handlePodCleanups(ctx context.Context) {
	all := k.pods.GetPods()
	known := k.workers.SyncKnownPods(all)

	wanted := make(map[types.UID]bool, len(all))
	for _, p := range all {
		wanted[p.UID] = true
	}
	running, err := k.runtime.GetPods(ctx, false)
	if err != nil {
		k.log("cleanup listing the runtime: %v", err)
	} else {
		runs := make(map[types.UID]bool, len(running))
		for _, rp := range running {
			runs[rp.ID] = true
		}
		k.cleanupPodDirs(wanted, runs) // volumes.go
		for _, rp := range running {
			if wanted[rp.ID] {
				continue
			}
			if _, ok := known[rp.ID]; ok {
				continue // its worker is already terminating it
			}
			k.log("cleanup %s/%s runs in the runtime but no pod wants it → kill it (runtime-only pod)", rp.Namespace, rp.Name)
			k.workers.UpdatePod(kubeletpkg.UpdatePodOptions{UpdateType: kubetypes.SyncPodKill, RunningPod: rp})
		}
	}

	k.deleteOrphanedMirrorPods(ctx)
	k.collectGarbage(ctx)
	k.status.RemoveOrphanedStatuses(wanted)
	for uid := range k.reasons.uids() {
		if !wanted[uid] {
			k.reasons.forget(uid)
		}
	}
}

// collectGarbage is the kubelet's container GC (kubelet.go:1573, every
// ContainerGCPeriod): dead containers and sandboxes of pods that are over
// go, one dead instance per container of a living pod stays (the one
// `kubectl logs --previous` reads). Whether a pod is over is the pod
// workers' answer, as upstream's GC asks them (kuberuntime_gc.go:236-243):
// deleted and terminated, even while its object is still in the apiserver.
// Nothing is collected before the pod source delivered its first list:
// until then every pod looks gone.
func (k *Kubelet) collectGarbage(ctx context.Context) {
	if !k.sourcesReady || k.clock.Since(k.lastGC) < k.o.GCPeriod {
		return
	}
	k.lastGC = k.clock.Now()
	res, err := k.manager.GarbageCollect(ctx, kuberuntime.GCOptions{
		Policy: kuberuntime.DefaultGCPolicy, Pods: k.workers, AllSourcesReady: true,
		// only what this node made: the runtime may be shared (NodeLabel)
		Selector: map[string]string{NodeLabel: k.o.NodeName},
	})
	if n := len(res.Containers) + len(res.Sandboxes); n > 0 {
		k.log("gc      removed %d container(s), %d sandbox(es), %d log folder(s) of pods that are over", len(res.Containers), len(res.Sandboxes), len(res.LogDirs))
	}
	if err != nil {
		k.log("gc      %v", err)
	}
}
