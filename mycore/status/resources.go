package status

import (
	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

// containerResources sets a container status's resources and
// allocatedResources, as convertToAPIContainerStatuses does with
// InPlacePodVerticalScaling (GA, kubelet_pods.go:2665-2673). Our node
// takes every resize the apiserver accepted, so the spec is the
// allocation; the resources are what the runtime reports the container has
// (mycore/kuberuntime/resize.go brings them to the spec).
func containerResources(spec *v1.Container, st *v1.ContainerStatus, cs *kubecontainer.Status, old *v1.ContainerStatus) {
	st.Resources = statusResources(spec, st, cs, old)
	st.AllocatedResources = spec.Resources.Requests
}

// statusResources is the convertContainerStatusResources closure
// (kubelet_pods.go:2406-2472): a container that is not running shows what
// it was allocated; a running one what the runtime reports it has (CPU
// values at or below the kernel's minimum keep the allocated value), else
// what the last status showed for the same container, else the allocation.
func statusResources(spec *v1.Container, st *v1.ContainerStatus, cs *kubecontainer.Status, old *v1.ContainerStatus) *v1.ResourceRequirements {
	if cs.State != kubecontainer.ContainerStateRunning {
		return spec.Resources.DeepCopy()
	}
	oldResources := &v1.ResourceRequirements{}
	if old != nil && old.Resources != nil {
		oldResources = old.Resources
	}
	preserve := func(name v1.ResourceName, from, to v1.ResourceList) {
		if old != nil && old.State.Running != nil && st.ContainerID == old.ContainerID && from != nil {
			if r, ok := from[name]; ok {
				to[name] = r.DeepCopy()
			}
		}
	}
	r := spec.Resources.DeepCopy()
	actual := cs.Resources
	if actual == nil {
		actual = &kubecontainer.ContainerResources{}
	}
	if r.Limits != nil {
		if actual.CPULimit != nil {
			if actual.CPULimit.MilliValue() > cm.MinMilliCPULimit || r.Limits.Cpu().MilliValue() > cm.MinMilliCPULimit {
				r.Limits[v1.ResourceCPU] = actual.CPULimit.DeepCopy()
			}
		} else {
			preserve(v1.ResourceCPU, oldResources.Limits, r.Limits)
		}
		if actual.MemoryLimit != nil {
			r.Limits[v1.ResourceMemory] = actual.MemoryLimit.DeepCopy()
		} else {
			preserve(v1.ResourceMemory, oldResources.Limits, r.Limits)
		}
	}
	if r.Requests != nil {
		if actual.CPURequest != nil {
			if actual.CPURequest.MilliValue() > cm.MinShares || r.Requests.Cpu().MilliValue() > cm.MinShares {
				r.Requests[v1.ResourceCPU] = actual.CPURequest.DeepCopy()
			}
		} else {
			preserve(v1.ResourceCPU, oldResources.Requests, r.Requests)
		}
		// No runtime reports a memory request (no cgroup holds one):
		// upstream fills it from its actuated-state checkpoint
		// (kuberuntime_container.go:694-708), which a resize updates as it
		// calls the runtime; ours has none, so the allocation it is.
		if actual.MemoryRequest != nil {
			r.Requests[v1.ResourceMemory] = actual.MemoryRequest.DeepCopy()
		}
	}
	return r
}

// podResources sets the pod's own resources and allocatedResources
// (InPlacePodLevelResourcesVerticalScaling, beta and on in 1.36;
// kubelet_pods.go:2157-2163). Upstream reads a running pod's values back
// from its pod cgroup; our node makes no pod cgroups, so it reports the
// allocation, as upstream does for a pod that is not running
// (getEffectiveAllocatedResources, :2168-2179).
func podResources(pod *v1.Pod, s *v1.PodStatus) {
	if !utilfeature.DefaultFeatureGate.Enabled(features.InPlacePodLevelResourcesVerticalScaling) {
		return
	}
	opts := resourcehelper.PodResourcesOptions{SkipPodLevelResources: !utilfeature.DefaultFeatureGate.Enabled(features.PodLevelResources)}
	r := pod.Spec.Resources.DeepCopy()
	if r == nil {
		r = &v1.ResourceRequirements{}
	}
	r.Requests = resourcehelper.PodRequests(pod, opts)
	r.Limits = resourcehelper.PodLimits(pod, opts)
	s.Resources = r
	s.AllocatedResources = resourcehelper.PodRequests(pod, opts)
}
