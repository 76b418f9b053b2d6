package plegruntime

import (
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

// toResources is toKubeContainerResources (kuberuntime_container_linux.go:
// 393-421, unexported there): the resources the runtime says a container
// has, back in the API's units — the CPU limit from quota/period, the CPU
// request from the shares, the memory limit. nil when the runtime reports
// none (containerd 1.6 reports none): the status then shows what was asked.
func toResources(r *runtimeapi.ContainerResources) *kubecontainer.ContainerResources {
	l := r.GetLinux()
	if l == nil {
		return nil
	}
	var cpuLimit, cpuRequest, memLimit *resource.Quantity
	if l.CpuPeriod > 0 {
		if milli := cm.QuotaToMilliCPU(l.CpuQuota, l.CpuPeriod); milli > 0 {
			cpuLimit = resource.NewMilliQuantity(milli, resource.DecimalSI)
		}
	}
	if l.CpuShares > 0 {
		if milli := cm.SharesToMilliCPU(l.CpuShares); milli > 0 {
			cpuRequest = resource.NewMilliQuantity(milli, resource.DecimalSI)
		}
	}
	if l.MemoryLimitInBytes > 0 {
		memLimit = resource.NewQuantity(l.MemoryLimitInBytes, resource.BinarySI)
	}
	if cpuLimit == nil && cpuRequest == nil && memLimit == nil {
		return nil
	}
	return &kubecontainer.ContainerResources{CPULimit: cpuLimit, CPURequest: cpuRequest, MemoryLimit: memLimit}
}
