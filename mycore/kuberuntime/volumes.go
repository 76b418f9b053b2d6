package kuberuntime

import (
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

// VolumeMounter gives a container the CRI mounts of its volumeMounts
// (mycore/volumes.Manager: makeMounts, kubelet_pods.go:278). The volumes
// are set up before the pod's sync reaches the runtime (the kubelet's
// WaitForAttachAndMount); an error is a container this node cannot
// configure (CreateContainerConfigError).
type VolumeMounter interface {
	Mounts(pod *v1.Pod, c *v1.Container, env []kubecontainer.EnvVar) ([]*runtimeapi.Mount, error)
}

// volumeMounts are the container's mounts. Without a VolumeMounter
// (Options.Volumes) there are none: a node on the mock runtime (fleet
// mode), where no container could see them; the Manager says so in its
// log for every container that asked for some.
func (m *Manager) volumeMounts(pod *v1.Pod, c *v1.Container, env []kubecontainer.EnvVar) ([]*runtimeapi.Mount, error) {
	if m.volumes == nil {
		if len(c.VolumeMounts) > 0 {
			m.log("  %s/%s: %d volumeMount(s) not mounted: this node has no volume manager (no PodsDir)", pod.Name, c.Name, len(c.VolumeMounts))
		}
		return nil, nil
	}
	return m.volumes.Mounts(pod, c, env)
}
