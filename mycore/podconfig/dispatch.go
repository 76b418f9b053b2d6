package podconfig

import (
	"context"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	kubepod "k8s.io/kubernetes/pkg/kubelet/pod"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
	"k8s.io/kubernetes/pkg/kubelet/util/sliceutils"
)

// Handler is the config half of the kubelet's SyncHandler
// (pkg/kubelet/kubelet.go:286-293), with the same signatures. (The other
// two methods, HandlePodSyncs and HandlePodCleanups, are driven by the
// PLEG and the housekeeping ticker, not by config updates.)
type Handler interface {
	HandlePodAdditions(ctx context.Context, pods []*v1.Pod)
	HandlePodUpdates(ctx context.Context, pods []*v1.Pod)
	HandlePodRemoves(ctx context.Context, pods []*v1.Pod)
	HandlePodReconcile(ctx context.Context, pods []*v1.Pod)
}

// Dispatch hands one config update to h exactly as syncLoopIteration does
// (pkg/kubelet/kubelet.go:2707-2730):
//
//	ADD       → HandlePodAdditions  (:2708-2714)
//	UPDATE    → HandlePodUpdates    (:2715-2717)
//	REMOVE    → HandlePodRemoves    (:2718-2720)
//	RECONCILE → HandlePodReconcile  (:2721-2723)
//	DELETE    → HandlePodUpdates    (:2724-2727, "DELETE is treated as a
//	            UPDATE because of graceful deletion": the pod stays, with
//	            its deletionTimestamp, until its containers are stopped)
//
// An unknown op is an error (the kubelet logs "Invalid operation type").
func Dispatch(ctx context.Context, u kubetypes.PodUpdate, h Handler) error {
	switch u.Op {
	case kubetypes.ADD:
		h.HandlePodAdditions(ctx, u.Pods)
	case kubetypes.UPDATE:
		h.HandlePodUpdates(ctx, u.Pods)
	case kubetypes.REMOVE:
		h.HandlePodRemoves(ctx, u.Pods)
	case kubetypes.RECONCILE:
		h.HandlePodReconcile(ctx, u.Pods)
	case kubetypes.DELETE:
		h.HandlePodUpdates(ctx, u.Pods)
	default:
		return fmt.Errorf("invalid operation type %s from source %q", OpName(u.Op), u.Source)
	}
	return nil
}

// ManagerHandler does to a pod manager what the kubelet's handlers do
// before they involve admission and the pod workers: the pod manager is
// the kubelet's record of the pods it should run (its desired state).
type ManagerHandler struct {
	Pods kubepod.Manager
}

var _ Handler = ManagerHandler{}

// HandlePodAdditions adds the pods, oldest first (kubelet.go:2835-2842):
// after a restart every pod arrives in one ADD, and admission must see
// them in the order they were created.
//
// It is the first of three layers, each a part of upstream's one
// (*Kubelet).HandlePodAdditions (k8s.io/kubernetes@v1.36.3
// pkg/kubelet/kubelet.go:2832-2908), so that a lab can stop at its part:
// this one is only the pod manager's lines (labs 08 and 09, which have no
// workers); podworkers.Handlers.HandlePodAdditions adds the pod workers
// (lab 10); mycore/mykubelet's (*Kubelet).HandlePodAdditions adds
// admission (our whole kubelet). Each of the others calls this one first.
func (h ManagerHandler) HandlePodAdditions(_ context.Context, pods []*v1.Pod) {
	sort.Sort(sliceutils.PodsByCreationTime(pods))
	for _, p := range pods {
		h.Pods.AddPod(p)
	}
}

// HandlePodUpdates replaces the pods (kubelet.go:2916-2917).
func (h ManagerHandler) HandlePodUpdates(_ context.Context, pods []*v1.Pod) {
	for _, p := range pods {
		h.Pods.UpdatePod(p)
	}
}

// HandlePodRemoves forgets the pods (kubelet.go:3064); for a mirror pod
// that only drops the mirror ↔ static mapping.
func (h ManagerHandler) HandlePodRemoves(_ context.Context, pods []*v1.Pod) {
	for _, p := range pods {
		h.Pods.RemovePod(p)
	}
}

// HandlePodReconcile stores the new status (kubelet.go:3106-3107).
func (h ManagerHandler) HandlePodReconcile(_ context.Context, pods []*v1.Pod) {
	for _, p := range pods {
		h.Pods.UpdatePod(p)
	}
}
