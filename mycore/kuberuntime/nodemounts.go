package kuberuntime

import (
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// addNodeMounts adds the files the kubelet itself gives every container,
// after its volumes (the order of makeMounts, kubelet_pods.go:277-423,
// then kuberuntime_container.go:508-546): the pod's /etc/hosts (hosts.go)
// and the container's termination-message file (termination.go). Both
// live in the pod's folder under Options.PodsDir; without one, a
// container gets neither, as upstream without a pod folder.
func (m *Manager) addNodeMounts(pod *v1.Pod, c *v1.Container, cfg *runtimeapi.ContainerConfig, ips PodIPs) error {
	if m.podsDir == "" {
		return nil
	}
	if mount, err := m.hostsMount(pod, c, ips.PodIPs); err != nil {
		return err
	} else if mount != nil {
		cfg.Mounts = append(cfg.Mounts, mount)
	}
	mount, err := m.terminationMessageMount(pod, c)
	if err != nil {
		return err
	}
	if mount != nil {
		cfg.Mounts = append(cfg.Mounts, mount)
	}
	return nil
}
