package kuberuntime

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The hosts file's first line says who wrote it (kubelet_pods.go:80-81).
const (
	hostsHeader            = "# Kubernetes-managed hosts file.\n"
	hostsHeaderHostNetwork = "# Kubernetes-managed hosts file (host network).\n"
	containerHostsPath     = "/etc/hosts"
)

// hostsMount is makeHostsMount (kubelet_pods.go:460-472) as makeMounts
// decides it (:279-285, :415-421): every container of a pod gets the pod's
// hosts file PODSDIR/UID/etc-hosts at /etc/hosts — unless it mounts a
// volume there itself, or the pod is on the pod network and has no IP yet
// (nil, nil). The file is written again each time a container starts, so
// it always has the sandbox's current IPs.
func (m *Manager) hostsMount(pod *v1.Pod, c *v1.Container, podIPs []string) (*runtimeapi.Mount, error) {
	if len(podIPs) == 0 && !pod.Spec.HostNetwork {
		return nil, nil
	}
	for _, vm := range c.VolumeMounts {
		if vm.MountPath == containerHostsPath {
			return nil, nil
		}
	}
	var content []byte
	if pod.Spec.HostNetwork {
		// nodeHostsFileContent (:501): the node's own file, plus the aliases.
		node, err := os.ReadFile(containerHostsPath)
		if err != nil {
			return nil, fmt.Errorf("the node's hosts file, for a hostNetwork pod: %w", err)
		}
		content = append(append([]byte(hostsHeaderHostNetwork), node...), hostAliasEntries(pod.Spec.HostAliases)...)
	} else {
		hostname, domain := podHostnameAndDomain(pod, m.ClusterDomain())
		content = managedHosts(podIPs, hostname, domain, pod.Spec.HostAliases)
	}
	dir := filepath.Join(m.podsDir, string(pod.UID))
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("pod folder for /etc/hosts: %w", err)
	}
	path := filepath.Join(dir, "etc-hosts")
	// ensureHostsFile (:476-498): 0644 whatever the umask, so a container
	// running as any user can read it.
	if err := os.WriteFile(path, content, 0o644); err != nil {
		return nil, fmt.Errorf("pod's /etc/hosts: %w", err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		return nil, fmt.Errorf("pod's /etc/hosts: %w", err)
	}
	return &runtimeapi.Mount{HostPath: path, ContainerPath: containerHostsPath}, nil
}

// podHostnameAndDomain is GeneratePodHostNameAndDomain (kubelet_pods.go:580-617):
// the hostname the sandbox gets (hostname.go), and with spec.subdomain the
// domain SUBDOMAIN.NAMESPACE.svc.CLUSTERDOMAIN, clusterDomain being the
// kubelet's --cluster-domain (Options.ClusterDomain) — none with
// hostnameOverride, which names the host whole. Upstream writes the
// domain even when clusterDomain is "" (its default): then it ends in
// "svc.", and so does the pod's name in /etc/hosts.
func podHostnameAndDomain(pod *v1.Pod, clusterDomain string) (hostname, domain string) {
	hostname = podHostname(pod)
	if pod.Spec.HostnameOverride == nil && pod.Spec.Subdomain != "" {
		domain = fmt.Sprintf("%s.%s.svc.%s", pod.Spec.Subdomain, pod.Namespace, clusterDomain)
	}
	return hostname, domain
}

// managedHosts is managedHostsFileContent (kubelet_pods.go:515-538):
// localhost in IPv4 and IPv6, the IPv6 multicast names, one line per pod
// IP with the pod's name (fully qualified first when it has a domain), and
// the pod's hostAliases.
func managedHosts(podIPs []string, hostname, domain string, aliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(hostsHeader)
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	for _, ip := range podIPs {
		if domain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostname, domain, hostname)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
		}
	}
	b.Write(hostAliasEntries(aliases))
	return b.Bytes()
}

// hostAliasEntries is hostsEntriesFromHostAliases (kubelet_pods.go:540):
// one line per alias IP, after a comment.
func hostAliasEntries(aliases []v1.HostAlias) []byte {
	if len(aliases) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("\n# Entries added by HostAliases.\n")
	for _, a := range aliases {
		fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	return b.Bytes()
}
