package mykubelet

import (
	"context"
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	v1qos "k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/kubernetes/pkg/kubelet/sysctl"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
	"k8s.io/kubernetes/pkg/kubelet/util/sliceutils"
	schedulerframework "k8s.io/kubernetes/pkg/scheduler/framework"

	"kubelet-labs/mycore/journal"
	"kubelet-labs/mycore/podconfig"
)

// HandlePodAdditions is the kubelet's (k8s.io/kubernetes@v1.36.3
// pkg/kubelet/kubelet.go:2832-2908) with the admission our node does, and
// the last of three layers of it: it overrides the embedded
// podworkers.Handlers.HandlePodAdditions (which admits every pod, for the
// labs without admission) and, like it, leaves the pod manager's part to
// podconfig.ManagerHandler. Pods oldest first, each into the pod manager,
// then — unless it is already terminal or being stopped — admitted or
// rejected, and only an admitted pod goes to its worker. A rejected pod
// never runs: it is Failed with the reason (rejectPod, kubelet.go:2589).
//
// Admission is the kubelet's admit handlers, upstream's own, in upstream's
// order (kubelet.go:1078-1166): the sysctl allowlist (newSysctlAdmission),
// then the predicate admit handler (newPredicateAdmission): the OS checks,
// supplementalGroupsPolicy: Strict against the runtime's features, the
// resources the pod requests against the node's allocatable minus what
// the admitted pods request (OutOfcpu, OutOfmemory, OutOfpods …), node
// affinity and nodeSelector against the node's labels (NodeAffinity),
// spec.nodeName, host ports the admitted pods hold (NodePorts), and the
// node's NoExecute taints the pod does not tolerate (TaintToleration;
// static pods excepted). Each handler is
// given the pod and the other pods the node admitted and that are still
// alive (activePods). Left out: the eviction handler (no eviction
// manager), the resource managers' (no CPU, memory or topology manager),
// AppArmor, pod features, declared features and the shutdown handler; a
// critical pod that does not fit is rejected, as the others, where the
// kubelet would first evict pods of lower priority to make room
// (preemption.NewCriticalPodAdmissionHandler, kubelet.go:1117).
func (k *Kubelet) HandlePodAdditions(ctx context.Context, pods []*v1.Pod) {
	pods = append([]*v1.Pod(nil), pods...)
	sort.Sort(sliceutils.PodsByCreationTime(pods))
	for _, p := range pods {
		podconfig.ManagerHandler{Pods: k.pods}.HandlePodAdditions(ctx, []*v1.Pod{p})
		if pod, _, wasMirror := k.pods.GetPodAndMirrorPod(p); wasMirror {
			if pod != nil {
				k.Handlers.Update(p, kubetypes.SyncPodUpdate)
			}
			continue
		}
		if !k.workers.IsPodTerminationRequested(p.UID) && !podutil.IsPodPhaseTerminal(p.Status.Phase) {
			if reason, message, ok := k.canAdmitPod(ctx, p); !ok {
				k.rejectPod(p, reason, message)
				continue
			}
		}
		k.Handlers.Update(p, kubetypes.SyncPodCreate)
	}
}

// canAdmitPod is the allocation manager's AddPod and canAdmitPod
// (allocation/allocation_manager.go:521-624): every handler in turn,
// the first that refuses decides. The other pods are the active pods
// (kubelet_pods.go:208, as HandlePodAdditions passes them) without the
// pod itself, which the pod manager already holds. (Upstream gives them
// their allocated resources, getAllocatedPods :627; ours takes every
// resize at once, so what a pod asks is what it was given.)
func (k *Kubelet) canAdmitPod(ctx context.Context, pod *v1.Pod) (reason, message string, ok bool) {
	if wantsStrictGroups(pod) {
		k.refreshRuntimeFeatures(ctx, pod)
	}
	// Admit takes no context (predicate.go:120-122): the Node's reads get
	// the loop's (in fleet mode it says which node asks), without its
	// end — a node that is stopping must not reject a pod, for good,
	// because its own read was cancelled.
	k.admitCtx = context.WithoutCancel(ctx)
	others := slices.DeleteFunc(k.activePods(), func(p *v1.Pod) bool { return p.UID == pod.UID })
	attrs := &lifecycle.PodAdmitAttributes{Pod: pod, OtherPods: others, Operation: lifecycle.AddOperation}
	for _, h := range k.admitHandlers {
		if r := h.Admit(attrs); !r.Admit {
			return r.Reason, r.Message, false
		}
	}
	return "", "", true
}

// activePods is GetActivePods (kubelet_pods.go:208-212, :1129-1177): the
// pod manager's pods, less those known to be fully terminated and those
// in a terminal phase — in the pod source's copy or in what the status
// manager holds, where a rejected pod's Failed is — unless they are
// still being stopped. A pod that was rejected, or has finished, holds
// no port and no resources any more.
func (k *Kubelet) activePods() []*v1.Pod {
	all := k.pods.GetPods()
	active := make([]*v1.Pod, 0, len(all))
	for _, p := range all {
		if k.workers.IsPodKnownTerminated(p.UID) {
			continue
		}
		if k.isAdmittedPodTerminal(p) && !k.workers.IsPodTerminationRequested(p.UID) {
			continue
		}
		active = append(active, p)
	}
	return active
}

// isAdmittedPodTerminal is the kubelet's (kubelet_pods.go:1162-1177).
func (k *Kubelet) isAdmittedPodTerminal(p *v1.Pod) bool {
	if podutil.IsPodPhaseTerminal(p.Status.Phase) {
		return true
	}
	st, ok := k.status.GetPodStatus(p.UID)
	return ok && podutil.IsPodPhaseTerminal(st.Phase)
}

// newPredicateAdmission is the kubelet's predicate admit handler
// (kubelet.go:1117-1118), upstream's own (lifecycle/predicate.go). It is
// given the Node as the node's cache has it, with the runtime's features
// (forAdmission); a failure handler that only passes the failure on
// (upstream's stub: we evict nothing to make room); and no plugin
// resources to add to the node's allocatable (no device plugins).
func (k *Kubelet) newPredicateAdmission() lifecycle.PodAdmitHandler {
	getNode := func(_ context.Context, useCache bool) (*v1.Node, error) {
		ctx := k.admitCtx
		if ctx == nil {
			ctx = context.Background()
		}
		n, err := k.node.get(ctx, useCache)
		if err != nil {
			k.log("admit   cannot get the node: %v", err)
			return nil, err
		}
		var strict *bool
		if k.runtimeFeatures != nil {
			strict = &k.runtimeFeatures.SupplementalGroupsPolicy
		}
		return forAdmission(n, strict), nil
	}
	noPlugins := func(*schedulerframework.NodeInfo, *lifecycle.PodAdmitAttributes) error { return nil }
	return lifecycle.NewPredicateAdmitHandler(getNode, lifecycle.NewAdmissionFailureHandlerStub(), noPlugins)
}

// refreshRuntimeFeatures asks the runtime what it implements, for a pod
// that wants supplementalGroupsPolicy: Strict: the predicate handler
// refuses it unless node.status.features says the runtime implements it
// (predicate.go:151-158, :316-346; the feature is GA in 1.36, so the check
// always applies). A runtime that does not (containerd 1.6, 1.7) ignores
// the field it does not know and runs the container with the groups of
// the image's /etc/group merged in — the pod would run without what it
// asked. The kubelet fills status.features from the runtime's CRI Status
// (kubelet.go:3279, nodestatus/setters.go:431-447); our node asks the
// runtime itself, and only for a pod that wants Strict: a pod without it
// is never refused for it. When the runtime does not answer, the
// features of its last answer count, as upstream's cached ones; none yet
// count as missing, as an unset node.status.features does upstream. The
// call outlives the end of the loop's context: a kubelet that is stopping
// must not reject a pod — for good — because its own call was cancelled.
func (k *Kubelet) refreshRuntimeFeatures(ctx context.Context, pod *v1.Pod) {
	if f, err := k.manager.RuntimeFeatures(context.WithoutCancel(ctx)); err != nil {
		k.log("admit   %s/%s: CRI Status failed, the runtime's features are its last answer's (%v): %v", pod.Namespace, pod.Name, k.runtimeFeatures, err)
	} else {
		k.runtimeFeatures = f
	}
}

// wantsStrictGroups: the pod's supplementalGroupsPolicy is Strict (unset
// is Merge).
func wantsStrictGroups(pod *v1.Pod) bool {
	psc := pod.Spec.SecurityContext
	return psc != nil && psc.SupplementalGroupsPolicy != nil && *psc.SupplementalGroupsPolicy == v1.SupplementalGroupsPolicyStrict
}

// rejectPod is the kubelet's (kubelet.go:2589-2597) without the event:
// the pod's status becomes Failed with the reason.
func (k *Kubelet) rejectPod(pod *v1.Pod, reason, message string) {
	k.sayPod(journal.Other, pod.Namespace, pod.Name, pod.UID, "admit", "admit   %s/%s rejected: %s: %s", pod.Namespace, pod.Name, reason, message)
	k.status.SetPodStatus(pod, v1.PodStatus{
		QOSClass: v1qos.GetPodQOS(pod),
		Phase:    v1.PodFailed,
		Reason:   reason,
		Message:  "Pod was rejected: " + message,
	})
}

// newSysctlAdmission is the kubelet's sysctl admit handler (kubelet.go:
// 1100-1105), upstream's own: the safe sysctls for this kernel
// (pkg/kubelet/sysctl/safe_sysctls.go) and no unsafe ones allowed (the
// kubelet's --allowed-unsafe-sysctls is empty by default). A pod asking
// for another is rejected with reason SysctlForbidden before it runs.
func newSysctlAdmission(ctx context.Context) (lifecycle.PodAdmitHandler, error) {
	return sysctl.NewAllowlist(sysctl.SafeSysctlAllowlist(ctx))
}
