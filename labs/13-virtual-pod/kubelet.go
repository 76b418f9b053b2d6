package main

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	v1qos "k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"
	"k8s.io/kubernetes/pkg/kubelet"
	kubepod "k8s.io/kubernetes/pkg/kubelet/pod"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/mycore/podconfig"
	"kubelet-labs/mycore/podworkers"
	"kubelet-labs/mycore/status"
)

// virtualKubelet is the kubelet's sync loop and pod handlers (kubelet.go,
// v1.36.3) around a runtime that is not a container runtime.
type virtualKubelet struct {
	pods    kubepod.Manager
	workers *podworkers.Workers
	status  *status.Manager
	rt      *virtualRuntime
	logf    func(format string, args ...any)
}

var _ podconfig.Handler = (*virtualKubelet)(nil)

// syncLoop is syncLoopIteration (kubelet.go:2695-2815) with its three
// inputs here: config updates, the runtime's change events (where the
// PLEG's events would come from), and the housekeeping tick.
func (k *virtualKubelet) syncLoop(ctx context.Context, updates <-chan kubetypes.PodUpdate, housekeeping <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case u, ok := <-updates:
			if !ok {
				return
			}
			for _, p := range u.Pods {
				k.logf("config  %-9s %s", podconfig.OpName(u.Op), podName(p))
			}
			if err := podconfig.Dispatch(ctx, u, k); err != nil {
				k.logf("config  %v", err)
			}
		case uid := <-k.rt.events:
			if pod, ok := k.pods.GetPodByUID(uid); ok {
				k.HandlePodSyncs(ctx, []*v1.Pod{pod})
			}
		case <-housekeeping:
			k.housekeeping()
		}
	}
}

// admit is this node's admission (HandlePodAdditions asks its admit
// handlers, kubelet.go:2868-2880): the pods it cannot run are rejected
// before any work starts.
func admit(pod *v1.Pod) (reason, message string, ok bool) {
	switch {
	case pod.Spec.RestartPolicy != v1.RestartPolicyNever:
		return "UnsupportedRestartPolicy", "restartPolicy " + string(pod.Spec.RestartPolicy) +
			": this virtual node runs each container once, set restartPolicy: Never", false
	case len(pod.Spec.InitContainers) > 0:
		return "UnsupportedInitContainers", "this virtual node does not run init containers", false
	}
	return "", "", true
}

// HandlePodAdditions: into the pod manager; admitted pods get a worker, the
// others are rejected: Failed, with the reason, and no worker
// (kubelet.go:2832-2908, rejectPod :2589-2597).
func (k *virtualKubelet) HandlePodAdditions(ctx context.Context, pods []*v1.Pod) {
	podconfig.ManagerHandler{Pods: k.pods}.HandlePodAdditions(ctx, pods)
	for _, p := range pods {
		if !k.workers.IsPodTerminationRequested(p.UID) && !podutil.IsPodPhaseTerminal(p.Status.Phase) {
			if reason, message, ok := admit(p); !ok {
				k.logf("admit   %s rejected: %s: %s", podName(p), reason, message)
				k.status.SetPodStatus(p, v1.PodStatus{QOSClass: v1qos.GetPodQOS(p), Phase: v1.PodFailed,
					Reason: reason, Message: "Pod was rejected: " + message})
				continue
			}
		}
		k.workers.UpdatePod(kubelet.UpdatePodOptions{Pod: p, UpdateType: kubetypes.SyncPodCreate})
	}
}

// HandlePodUpdates: a changed pod or a graceful delete; the worker sees
// the deletionTimestamp (kubelet.go:2912-2971).
func (k *virtualKubelet) HandlePodUpdates(ctx context.Context, pods []*v1.Pod) {
	podconfig.ManagerHandler{Pods: k.pods}.HandlePodUpdates(ctx, pods)
	for _, p := range pods {
		k.workers.UpdatePod(kubelet.UpdatePodOptions{Pod: p, UpdateType: kubetypes.SyncPodUpdate})
	}
}

// HandlePodRemoves: the pod is gone from the apiserver; kill it if it still
// runs (kubelet.go:3059-3092).
func (k *virtualKubelet) HandlePodRemoves(ctx context.Context, pods []*v1.Pod) {
	podconfig.ManagerHandler{Pods: k.pods}.HandlePodRemoves(ctx, pods)
	for _, p := range pods {
		k.workers.UpdatePod(kubelet.UpdatePodOptions{Pod: p, UpdateType: kubetypes.SyncPodKill})
	}
}

// HandlePodReconcile: only the status changed — usually our own post
// coming back through the watch (kubelet.go:3097-3184).
func (k *virtualKubelet) HandlePodReconcile(ctx context.Context, pods []*v1.Pod) {
	podconfig.ManagerHandler{Pods: k.pods}.HandlePodReconcile(ctx, pods)
}

// HandlePodSyncs: the runtime changed for this pod (kubelet.go:3188-3211).
func (k *virtualKubelet) HandlePodSyncs(_ context.Context, pods []*v1.Pod) {
	for _, p := range pods {
		k.workers.UpdatePod(kubelet.UpdatePodOptions{Pod: p, UpdateType: kubetypes.SyncPodSync})
	}
}

// housekeeping is HandlePodCleanups (kubelet_pods.go:1205) cut to what
// this node has: the workers forget finished pods that are gone, the
// status manager their statuses, the runtime their records.
func (k *virtualKubelet) housekeeping() {
	all := k.pods.GetPods()
	k.workers.SyncKnownPods(all)
	wanted := map[types.UID]bool{}
	for _, p := range all {
		wanted[p.UID] = true
	}
	k.status.RemoveOrphanedStatuses(wanted)
	for _, uid := range k.rt.PodUIDs() {
		if !wanted[uid] && !k.workers.CouldHaveRunningContainers(uid) {
			k.rt.Remove(uid)
		}
	}
}
