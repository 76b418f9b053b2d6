package kuberuntime

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/kubernetes/pkg/kubelet/allocation"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"kubelet-labs/mycore/cri"
)

// In-place resize: a running pod's containers get new CPU and memory
// without a restart (`kubectl patch pod --subresource resize`, GA in 1.35).
// Upstream keeps a checkpoint of what each container was last given (the
// "actuated" resources, pkg/kubelet/allocation/state) and compares the spec
// with it; this node compares the spec with what the runtime reports the
// container has (the pod cache's ContainerStatus resources), which is what
// the status shows anyway. A runtime that reports nothing (containerd 1.6)
// is never resized. Also left out: the admission of a resize against the
// node's allocatable (PodResizePending, Infeasible or Deferred): this node
// takes every resize the apiserver accepted, as it admits every pod's
// requests; and pod-level resources, which need pod cgroups.

// ContainerToUpdate is containerToUpdateInfo (kuberuntime_manager.go:
// 583-592): a running container whose resources change in place.
type ContainerToUpdate struct {
	Index int // in pod.Spec.Containers
	ID    kubecontainer.ContainerID
	// Shrinks: some value goes down; these are updated first, as
	// computePodResizeAction orders decreases before increases (:775-783).
	Shrinks bool
}

// runtimeResources are the values a resize compares, in the units the
// runtime reports them back (plegruntime's toResources): milli-CPU from the
// shares and from the quota, memory limit in bytes.
type runtimeResources struct {
	cpuRequest, cpuLimit, memoryLimit int64
}

func desiredResources(r *runtimeapi.LinuxContainerResources) runtimeResources {
	var got runtimeResources
	if r.CpuShares > 0 {
		got.cpuRequest = cm.SharesToMilliCPU(r.CpuShares)
	}
	if r.CpuPeriod > 0 && r.CpuQuota > 0 {
		got.cpuLimit = cm.QuotaToMilliCPU(r.CpuQuota, r.CpuPeriod)
	}
	got.memoryLimit = r.MemoryLimitInBytes
	return got
}

func reportedResources(r *kubecontainer.ContainerResources) runtimeResources {
	var got runtimeResources
	if r.CPURequest != nil {
		got.cpuRequest = r.CPURequest.MilliValue()
	}
	if r.CPULimit != nil {
		got.cpuLimit = r.CPULimit.MilliValue()
	}
	if r.MemoryLimit != nil {
		got.memoryLimit = r.MemoryLimit.Value()
	}
	return got
}

// computeResize is computePodResizeAction (kuberuntime_manager.go:714-818)
// for one running regular container: nothing changed, or an update in
// place, or — when the container's resizePolicy says RestartContainer for
// a resource that changed — a restart with the new values. It returns
// whether the container is kept running.
func (m *Manager) computeResize(pod *v1.Pod, i int, s *kubecontainer.Status, a *PodActions) bool {
	if ok, _, _ := allocation.IsInPlacePodVerticalScalingAllowed(pod); !ok || s.Resources == nil {
		return true
	}
	c := &pod.Spec.Containers[i]
	want := desiredResources(m.containerResources(pod, c))
	have := reportedResources(s.Resources)
	if want == have {
		return true
	}
	changed := map[v1.ResourceName]bool{
		v1.ResourceCPU:    want.cpuRequest != have.cpuRequest || want.cpuLimit != have.cpuLimit,
		v1.ResourceMemory: want.memoryLimit != have.memoryLimit,
	}
	for _, p := range c.ResizePolicy { // no policy for a resource: NotRequired
		if changed[p.ResourceName] && p.RestartPolicy == v1.RestartContainer {
			a.ContainersToKill[s.ID] = ContainerToKill{Name: c.Name, Container: c, Reason: ReasonUnknown,
				Message: fmt.Sprintf("Container %s resize requires restart", c.Name)}
			a.ContainersToStart = append(a.ContainersToStart, i)
			return false
		}
	}
	shrinks := want.cpuRequest < have.cpuRequest || want.cpuLimit < have.cpuLimit || want.memoryLimit < have.memoryLimit
	a.ContainersToUpdate = append(a.ContainersToUpdate, ContainerToUpdate{Index: i, ID: s.ID, Shrinks: shrinks})
	return true
}

// resizeInPlace is doPodResizeAction and updatePodContainerResources
// (:820-1172) without the pod cgroup: each container gets all of its new
// values in one CRI UpdateContainerResources, those that shrink first.
// The runtime writes them into the container's cgroup; the pod cache shows
// them after the PLEG inspects the pod again (the caller asks it to).
func (m *Manager) resizeInPlace(ctx context.Context, pod *v1.Pod, toUpdate []ContainerToUpdate) *kubecontainer.SyncResult {
	r := kubecontainer.NewSyncResult(kubecontainer.ResizePodInPlace, pod.Name)
	order := slices.Clone(toUpdate)
	slices.SortStableFunc(order, func(x, y ContainerToUpdate) int {
		switch {
		case x.Shrinks && !y.Shrinks:
			return -1
		case y.Shrinks && !x.Shrinks:
			return 1
		}
		return 0
	})
	for _, u := range order {
		c := &pod.Spec.Containers[u.Index]
		res := m.containerResources(pod, c)
		on := podAbout(pod).of(c.Name).saying("CRI UpdateContainerResources %s/%s %s: cpu shares %d, quota %d/%d, memory limit %d",
			pod.Name, c.Name, cri.ShortID(u.ID.ID), res.CpuShares, res.CpuQuota, res.CpuPeriod, res.MemoryLimitInBytes)
		if err := m.cri.UpdateContainerResources(ctx, on, u.ID.ID, &runtimeapi.ContainerResources{Linux: res}); err != nil {
			// Stop here: the next sync computes what is left and tries again.
			r.Fail(kubecontainer.ErrResizePodInPlace, fmt.Sprintf("UpdateContainerResources %s: %v", c.Name, grpcMessage(err)))
			return r
		}
	}
	return r
}

// ResizeInProgress is IsPodResizeInProgress (kuberuntime_manager.go:
// 2190-2222) with the runtime's report as the actuated values: a running
// regular container does not have what its spec asks yet. The kubelet sets
// the pod's PodResizeInProgress condition while this holds.
func (m *Manager) ResizeInProgress(pod *v1.Pod, podStatus *kubecontainer.PodStatus) bool {
	if ok, _, _ := allocation.IsInPlacePodVerticalScalingAllowed(pod); !ok || podStatus == nil {
		return false
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		s := podStatus.FindContainerStatusByName(c.Name)
		if s == nil || s.State != kubecontainer.ContainerStateRunning || s.Resources == nil {
			continue
		}
		if desiredResources(m.containerResources(pod, c)) != reportedResources(s.Resources) {
			return true
		}
	}
	return false
}
