package kubelet

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	kubeletpkg "k8s.io/kubernetes/pkg/kubelet"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
)

// handlePodCleanups is HandlePodCleanups (kubelet_pods.go:1205), run every
// housekeeping period:
//   - the workers learn which pods are still wanted: finished ones that are
//     not are forgotten, running ones that are not are terminated;
//   - a pod the runtime runs but nobody wants any more (its object was
//     deleted while this node was down, or its containers were started by
//     someone else with our labels) is killed as a runtime-only pod;
//   - statuses and reasons of forgotten pods are dropped.
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

	k.status.RemoveOrphanedStatuses(wanted)
	for uid := range k.reasons.uids() {
		if !wanted[uid] {
			k.reasons.forget(uid)
		}
	}
}
