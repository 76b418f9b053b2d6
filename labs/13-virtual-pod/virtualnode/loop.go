package virtualnode

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	v1qos "k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/mycore/podconfig"
	"kubelet-labs/mycore/podworkers"
	"kubelet-labs/mycore/status"
)

// Loop is the kubelet's sync loop and pod handlers (kubelet.go, v1.36.3)
// around a runtime that is not a container runtime. The handlers are
// mycore/podworkers' (the same as mycore/mykubelet's), except
// HandlePodAdditions, which admits.
type Loop struct {
	podworkers.Handlers
	Status  *status.Manager
	Runtime *Runtime
	Log     func(format string, args ...any)
}

var _ podconfig.Handler = (*Loop)(nil)

// Run is syncLoopIteration (kubelet.go:2695-2815) with its three inputs
// here: config updates, the runtime's change events (where the PLEG's
// events would come from), and the housekeeping tick. It returns when ctx
// ends or updates closes.
func (k *Loop) Run(ctx context.Context, updates <-chan kubetypes.PodUpdate, housekeeping <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case u, ok := <-updates:
			if !ok {
				return
			}
			for _, p := range u.Pods {
				k.Log("config  %-9s %s", podconfig.OpName(u.Op), klog.KObj(p))
			}
			if err := podconfig.Dispatch(ctx, u, k); err != nil {
				k.Log("config  %v", err)
			}
		case uid := <-k.Runtime.events:
			if pod, ok := k.Pods.GetPodByUID(uid); ok {
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
func (k *Loop) HandlePodAdditions(ctx context.Context, pods []*v1.Pod) {
	podconfig.ManagerHandler{Pods: k.Pods}.HandlePodAdditions(ctx, pods)
	for _, p := range pods {
		if !k.Workers.IsPodTerminationRequested(p.UID) && !podutil.IsPodPhaseTerminal(p.Status.Phase) {
			if reason, message, ok := admit(p); !ok {
				k.Log("admit   %s rejected: %s: %s", klog.KObj(p), reason, message)
				k.Status.SetPodStatus(p, v1.PodStatus{QOSClass: v1qos.GetPodQOS(p), Phase: v1.PodFailed,
					Reason: reason, Message: "Pod was rejected: " + message})
				continue
			}
		}
		k.Update(p, kubetypes.SyncPodCreate)
	}
}

// housekeeping is HandlePodCleanups (kubelet_pods.go:1205) cut to what
// this node has: the workers forget finished pods that are gone, the
// status manager their statuses, the runtime their records.
func (k *Loop) housekeeping() {
	all := k.Pods.GetPods()
	k.Workers.SyncKnownPods(all)
	wanted := map[types.UID]bool{}
	for _, p := range all {
		wanted[p.UID] = true
	}
	k.Status.RemoveOrphanedStatuses(wanted)
	for _, uid := range k.Runtime.PodUIDs() {
		if !wanted[uid] && !k.Workers.CouldHaveRunningContainers(uid) {
			k.Runtime.Remove(uid)
		}
	}
}
