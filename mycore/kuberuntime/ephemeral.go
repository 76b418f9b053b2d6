package kuberuntime

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

// ephemeralContainer is the pod's ephemeral container named name, if the
// container being started is one: SyncPod starts them as the v1.Container
// their common fields make (kuberuntime_container.go:117-122).
func ephemeralContainer(pod *v1.Pod, name string) *v1.EphemeralContainer {
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			return &pod.Spec.EphemeralContainers[i]
		}
	}
	return nil
}

// targetNamespace puts an ephemeral container with a targetContainerName
// into that container's PID namespace (`kubectl debug --target`), so it
// sees the target's processes: getTargetID (kuberuntime_container.go:129-
// 139) and generateLinuxContainerConfig (kuberuntime_container_linux.go:
// 91-94). A pod that shares one PID namespace already needs no target.
func targetNamespace(pod *v1.Pod, c *v1.Container, podStatus *kubecontainer.PodStatus, cfg *runtimeapi.ContainerConfig) error {
	ec := ephemeralContainer(pod, c.Name)
	if ec == nil || ec.TargetContainerName == "" {
		return nil
	}
	target := podStatus.FindContainerStatusByName(ec.TargetContainerName)
	if target == nil {
		return fmt.Errorf("unable to find target container %v", ec.TargetContainerName)
	}
	ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if ns != nil && ns.Pid == runtimeapi.NamespaceMode_CONTAINER {
		ns.Pid = runtimeapi.NamespaceMode_TARGET
		ns.TargetId = target.ID.ID
	}
	return nil
}
