package mykubelet

import (
	v1 "k8s.io/api/core/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

// withStatusIPs is the runtime's view of the pod with the IPs the API
// status shows (kubelet.go:2075-2084): a host-network pod's sandbox has no
// IP of its own (containerd reports none), its status has the node's, and
// the containers' status.podIP(s) env must say the same. A copy: the pod
// cache's status is shared with the PLEG and the other workers.
func withStatusIPs(ps *kubecontainer.PodStatus, api v1.PodStatus) *kubecontainer.PodStatus {
	if ps == nil {
		return nil
	}
	c := *ps
	c.IPs = make([]string, 0, len(api.PodIPs))
	for _, ip := range api.PodIPs {
		c.IPs = append(c.IPs, ip.IP)
	}
	if len(c.IPs) == 0 && api.PodIP != "" {
		c.IPs = []string{api.PodIP}
	}
	return &c
}
