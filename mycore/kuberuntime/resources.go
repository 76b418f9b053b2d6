package kuberuntime

import (
	"context"
	"syscall"

	libcontainercgroups "github.com/opencontainers/cgroups"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	resourcehelper "k8s.io/component-helpers/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	kubekr "k8s.io/kubernetes/pkg/kubelet/kuberuntime"
	"k8s.io/kubernetes/pkg/kubelet/qos"
)

// containerResources is generateLinuxContainerResources
// (kuberuntime_container_linux.go:128-211) with the kubelet's defaults: CFS
// quota on (cpuCFSQuota) with the 100 ms period, no exclusive CPUs (no CPU
// manager), no swap (NodeSwap's NoSwap default, which on cgroup v1 sets
// nothing), no MemoryQoS (alpha, off):
//
//   - cpu shares from the CPU request (the limit if only a limit is set;
//     2 without either), cpu quota from the CPU limit (0: none);
//   - memory limit from the memory limit (0: none);
//   - pod-level limits (PodLevelResources) where the container sets none;
//   - oom_score_adj by the pod's QoS class (pkg/kubelet/qos);
//   - hugepage limits;
//   - on cgroup v2, memory.oom.group=1: an OOM kills the whole container,
//     the kubelet's default (singleProcessOOMKill false, kubelet.go:746-757).
//
// The runtime writes these into the container's cgroup: what
// /sys/fs/cgroup/memory.max (v2) or memory/memory.limit_in_bytes (v1) shows
// inside it.
func (m *Manager) containerResources(pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerResources {
	var cpuRequest *resource.Quantity
	if _, ok := c.Resources.Requests[v1.ResourceCPU]; ok {
		cpuRequest = c.Resources.Requests.Cpu()
	}
	cpuLimit, memoryLimit := c.Resources.Limits.Cpu(), c.Resources.Limits.Memory()
	// getCPULimit / getMemoryLimit (:101-126).
	if utilfeature.DefaultFeatureGate.Enabled(features.PodLevelResources) && resourcehelper.IsPodLevelResourcesSet(pod) {
		if cpuLimit.IsZero() {
			cpuLimit = pod.Spec.Resources.Limits.Cpu()
		}
		if memoryLimit.IsZero() {
			memoryLimit = pod.Spec.Resources.Limits.Memory()
		}
	}

	// calculateLinuxResources (:284-333).
	r := &runtimeapi.LinuxContainerResources{}
	// No request: the limit's shares, as the apiserver defaults the
	// request to the limit (a zero limit: the minimum, 2).
	if cpuRequest == nil {
		r.CpuShares = int64(cm.MilliCPUToShares(cpuLimit.MilliValue()))
	} else {
		r.CpuShares = int64(cm.MilliCPUToShares(cpuRequest.MilliValue()))
	}
	if v := memoryLimit.Value(); v != 0 {
		r.MemoryLimitInBytes = v
	}
	r.CpuPeriod = int64(cm.QuotaPeriod)
	r.CpuQuota = cm.MilliCPUToQuota(cpuLimit.MilliValue(), r.CpuPeriod)
	if libcontainercgroups.IsCgroup2UnifiedMode() {
		r.Unified = map[string]string{"memory.oom.group": "1"}
	}

	r.OomScoreAdj = int64(qos.GetContainerOOMScoreAdjust(pod, c, m.memoryCapacity()))
	r.HugepageLimits = kubekr.GetHugepageLimitsFromResources(context.Background(), pod, c.Resources)
	return r
}

// memoryCapacity is the node's memory (the machine info's MemoryCapacity
// upstream): Options.MemoryCapacity, else what the kernel reports.
func (m *Manager) memoryCapacity() int64 {
	if m.memCapacity > 0 {
		return m.memCapacity
	}
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}
