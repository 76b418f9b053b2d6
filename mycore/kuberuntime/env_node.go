package kuberuntime

import (
	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/kubernetes/pkg/features"

	"kubelet-labs/mycore/status"
)

// hostIPs are the node's IPs: HostIPs, else the single HostIP.
func (p PodIPs) hostIPs() []string {
	if len(p.HostIPs) > 0 {
		return p.HostIPs
	}
	if p.HostIP != "" {
		return []string{p.HostIP}
	}
	return nil
}

// sortedPodIPs: the node's family first, as the status shows them
// (kl.sortPodIPs in podFieldSelectorRuntimeValue, kubelet_pods.go:1001).
func sortedPodIPs(podIPs, hostIPs []string) []string {
	return status.SortPodIPs(podIPs, hostIPs)
}

// podLevelAllocatable: with pod-level limits (PodLevelResources, beta and
// on in 1.36) a container without its own limit is bounded by the pod's,
// not the node's (kubelet_resources.go:46-60).
func podLevelAllocatable(pod *v1.Pod, allocatable v1.ResourceList) v1.ResourceList {
	if !utilfeature.DefaultFeatureGate.Enabled(features.PodLevelResources) || !resourcehelper.IsPodLevelLimitsSet(pod) {
		return allocatable
	}
	allocatable = allocatable.DeepCopy()
	for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage} {
		if !resourcehelper.IsSupportedPodLevelResource(r) {
			continue
		}
		if val, ok := pod.Spec.Resources.Limits[r]; ok && !val.IsZero() {
			if _, ok := allocatable[r]; ok {
				allocatable[r] = val.DeepCopy()
			}
		}
	}
	return allocatable
}
