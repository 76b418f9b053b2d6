package kuberuntime

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// hostnameMaxLen is what the kernel takes: sethostname(2) refuses more than
// 64 bytes, and the kubelet keeps one for the terminating NUL
// (truncatePodHostnameIfNeeded, pkg/kubelet/kubelet_pods.go:556, v1.36.3).
const hostnameMaxLen = 63

// podHostname is GeneratePodHostNameAndDomain (kubelet_pods.go:580-617)
// without the domain our node does not give pods: spec.hostnameOverride
// (the HostnameOverride feature, beta and on since 1.35), else
// spec.hostname, else the pod's name — cut to 63 characters with no '-' or
// '.' at the end. A pod name may be 253 characters; passed whole, runc's
// sethostname fails with EINVAL and the pod never starts. The apiserver
// has already validated hostname (a DNS label) and hostnameOverride (a DNS
// subdomain), which the kubelet checks again; a name cut to nothing cannot
// happen, as a valid name starts with an alphanumeric character.
func podHostname(pod *v1.Pod) string {
	hostname := pod.Name
	switch {
	case pod.Spec.HostnameOverride != nil:
		hostname = *pod.Spec.HostnameOverride
	case pod.Spec.Hostname != "":
		hostname = pod.Spec.Hostname
	}
	if len(hostname) <= hostnameMaxLen {
		return hostname
	}
	return strings.TrimRight(hostname[:hostnameMaxLen], "-.")
}
