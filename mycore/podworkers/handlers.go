package podworkers

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/kubelet"
	kubepod "k8s.io/kubernetes/pkg/kubelet/pod"
	kubestatus "k8s.io/kubernetes/pkg/kubelet/status"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/mycore/podconfig"
)

// Handlers are the kubelet's pod handlers as far as the pod manager and
// the pod workers go (pkg/kubelet/kubelet.go, v1.36.3): each config update
// is recorded in the pod manager, then handed to the pod's worker, a mirror
// pod standing for its static pod. Admission, probes and status are left
// to the caller: a node that has them embeds Handlers and overrides the
// method concerned (HandlePodAdditions for admission), calling Update for
// the worker's part.
type Handlers struct {
	Pods    kubepod.Manager
	Workers *Workers
}

var _ podconfig.Handler = Handlers{}

// HandlePodAdditions: into the pod manager, then a create for the worker
// (kubelet.go:2832-2908; admission is the caller's: here every pod is
// admitted).
//
// The second of three layers of upstream's (*Kubelet).HandlePodAdditions
// (k8s.io/kubernetes@v1.36.3 pkg/kubelet/kubelet.go:2832-2908): the pod
// manager's part is podconfig.ManagerHandler's (called first), this adds
// the worker's UpdatePod(SyncPodCreate) (:2892-2897), or for a mirror pod
// an update of its static pod (:2846-2859). It exists for a node without
// admission (lab 10's); a node that admits overrides it (mycore/mykubelet's
// (*Kubelet), lab 13's virtualnode.Loop) and keeps the other handlers.
func (h Handlers) HandlePodAdditions(ctx context.Context, pods []*v1.Pod) {
	podconfig.ManagerHandler{Pods: h.Pods}.HandlePodAdditions(ctx, pods)
	for _, p := range pods {
		h.Update(p, kubetypes.SyncPodCreate)
	}
}

// HandlePodUpdates: a changed pod, or a graceful delete (DELETE is handled
// as an UPDATE): the worker sees the deletionTimestamp (:2912-2971).
func (h Handlers) HandlePodUpdates(ctx context.Context, pods []*v1.Pod) {
	podconfig.ManagerHandler{Pods: h.Pods}.HandlePodUpdates(ctx, pods)
	for _, p := range pods {
		h.Update(p, kubetypes.SyncPodUpdate)
	}
}

// HandlePodRemoves: the pod is gone from the apiserver; kill it if it
// still runs (:3059-3092, deletePod :2569-2585). A mirror pod that goes
// kills nothing: its static pod is synced, and the sync makes it again.
func (h Handlers) HandlePodRemoves(ctx context.Context, pods []*v1.Pod) {
	podconfig.ManagerHandler{Pods: h.Pods}.HandlePodRemoves(ctx, pods)
	for _, p := range pods {
		if pod, mirror, wasMirror := h.Pods.GetPodAndMirrorPod(p); wasMirror {
			if pod != nil {
				h.Workers.UpdatePod(kubelet.UpdatePodOptions{Pod: pod, MirrorPod: mirror, UpdateType: kubetypes.SyncPodUpdate})
			}
			continue
		}
		h.Workers.UpdatePod(kubelet.UpdatePodOptions{Pod: p, UpdateType: kubetypes.SyncPodKill})
	}
}

// HandlePodReconcile: only the status changed in the apiserver, usually
// the node's own post coming back. The kubelet syncs the pod only if its
// Ready condition needs fixing (:3097-3184); a status manager's next pass
// corrects anything else.
//
// That is how a readiness gate opens: whoever owns the gate's condition
// (a controller, a test) patches the pod's status; the pod's Ready,
// computed by the last sync without it, no longer matches, so the pod is
// synced and its status computed again (status.NeedToReconcilePodReadiness,
// kubelet.go:3154-3164).
func (h Handlers) HandlePodReconcile(ctx context.Context, pods []*v1.Pod) {
	podconfig.ManagerHandler{Pods: h.Pods}.HandlePodReconcile(ctx, pods)
	for _, p := range pods {
		if kubestatus.NeedToReconcilePodReadiness(p) {
			h.Update(p, kubetypes.SyncPodSync)
		}
	}
}

// HandlePodSyncs: a PLEG event, a probe result or a resync for a pod the
// manager has (:3188-3211).
func (h Handlers) HandlePodSyncs(_ context.Context, pods []*v1.Pod) {
	for _, p := range pods {
		h.Update(p, kubetypes.SyncPodSync)
	}
}

// Update hands a pod to its worker with its mirror pod, if any; a mirror
// pod stands for its static pod, as an update (the handlers'
// GetPodAndMirrorPod step). A mirror pod without its static pod is
// dropped.
func (h Handlers) Update(p *v1.Pod, t kubetypes.SyncPodType) {
	pod, mirror, wasMirror := h.Pods.GetPodAndMirrorPod(p)
	if wasMirror {
		if pod == nil {
			return
		}
		t = kubetypes.SyncPodUpdate
	}
	h.Workers.UpdatePod(kubelet.UpdatePodOptions{Pod: pod, MirrorPod: mirror, UpdateType: t})
}
