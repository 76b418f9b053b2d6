package mykubelet

import (
	"context"
	"fmt"
	"runtime"
	"sort"

	v1 "k8s.io/api/core/v1"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	v1qos "k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/kubernetes/pkg/kubelet/sysctl"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
	"k8s.io/kubernetes/pkg/kubelet/util/sliceutils"

	"kubelet-labs/mycore/journal"
	"kubelet-labs/mycore/podconfig"
)

// HandlePodAdditions is the kubelet's (kubelet.go:2832-2908) with the
// admission our node does: pods oldest first, each into the pod manager,
// then — unless it is already terminal or being stopped — admitted or
// rejected, and only an admitted pod goes to its worker. A rejected pod
// never runs: it is Failed with the reason (rejectPod, kubelet.go:2589).
// Our admission is, in upstream's order (kubelet.go:1098-1118), the
// sysctl allowlist (newSysctlAdmission), then the predicate admit
// handler's OS checks (admitOS) and its supplementalGroupsPolicy check
// (admitSupplementalGroupsPolicy); the resource fit, node affinity, host
// ports and the other handlers (eviction, AppArmor …) are left out.
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
			if r := k.sysctls.Admit(&lifecycle.PodAdmitAttributes{Pod: p}); !r.Admit {
				k.rejectPod(p, r.Reason, r.Message)
				continue
			}
			if reason, message, ok := admitOS(p, runtime.GOOS); !ok {
				k.rejectPod(p, reason, message)
				continue
			}
			if reason, message, ok := k.admitSupplementalGroupsPolicy(ctx, p); !ok {
				k.rejectPod(p, reason, message)
				continue
			}
		}
		k.Handlers.Update(p, kubetypes.SyncPodCreate)
	}
}

// admitOS is the predicate admit handler's first checks (lifecycle/
// predicate.go:134-149, :276-308): a pod labelled kubernetes.io/os for
// another OS than the node's label (our node's is runtime.GOOS, set by
// mycore/node), and a pod whose spec.os.name is not the node's OS, are
// refused with upstream's reasons and messages.
func admitOS(pod *v1.Pod, nodeOS string) (reason, message string, ok bool) {
	if os, set := pod.Labels[v1.LabelOSStable]; set && os != nodeOS {
		return lifecycle.PodOSSelectorNodeLabelDoesNotMatch, "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label", false
	}
	if pod.Spec.OS != nil && string(pod.Spec.OS.Name) != nodeOS {
		return lifecycle.PodOSNotSupported, "Failed to admit pod as the OS field doesn't match node OS", false
	}
	return "", "", true
}

// admitSupplementalGroupsPolicy is the predicate admit handler's third
// check (lifecycle/predicate.go:151-158, :316-346; the feature is GA in
// 1.36, so the check always applies): a pod asking for
// supplementalGroupsPolicy: Strict is refused unless the runtime says it
// implements it. A runtime that does not (containerd 1.6, 1.7) ignores the
// field it does not know and runs the container with the groups of the
// image's /etc/group merged in — the pod would run without what it asked.
// Upstream reads the runtime's features from node.status.features, which
// it fills from the runtime's CRI Status (kubelet.go:3279,
// nodestatus/setters.go:431-447); our node asks the runtime itself, and
// only for a pod that wants Strict. When the runtime does not answer, the
// features of its last answer count, as upstream's cached ones; none yet
// count as missing, as an unset node.status.features does upstream. The
// call outlives the end of the loop's context: a kubelet that is
// stopping must not reject a pod — for good — because its own call was
// cancelled.
func (k *Kubelet) admitSupplementalGroupsPolicy(ctx context.Context, pod *v1.Pod) (reason, message string, ok bool) {
	if !wantsStrictGroups(pod) {
		return "", "", true
	}
	if f, err := k.manager.RuntimeFeatures(context.WithoutCancel(ctx)); err != nil {
		k.log("admit   %s/%s: CRI Status failed, the runtime's features are its last answer's (%v): %v", pod.Namespace, pod.Name, k.runtimeFeatures, err)
	} else {
		k.runtimeFeatures = f
	}
	return admitStrictGroups(k.runtimeFeatures)
}

// wantsStrictGroups: the pod's supplementalGroupsPolicy is Strict (unset
// is Merge).
func wantsStrictGroups(pod *v1.Pod) bool {
	psc := pod.Spec.SecurityContext
	return psc != nil && psc.SupplementalGroupsPolicy != nil && *psc.SupplementalGroupsPolicy == v1.SupplementalGroupsPolicyStrict
}

// admitStrictGroups is the verdict for a pod that wants Strict, given
// the runtime's features (nil: none known), with upstream's reason and
// message (predicate.go:152-157).
func admitStrictGroups(f *kubecontainer.RuntimeFeatures) (reason, message string, ok bool) {
	if f != nil && f.SupplementalGroupsPolicy {
		return "", "", true
	}
	return lifecycle.SupplementalGroupsPolicyNotSupported,
		fmt.Sprintf("SupplementalGroupsPolicy=%s is not supported in this node", v1.SupplementalGroupsPolicyStrict), false
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
