package kuberuntime

import (
	"context"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubekr "k8s.io/kubernetes/pkg/kubelet/kuberuntime"

	"kubelet-labs/mycore/cri"
)

// SandboxConfig is generatePodSandboxConfig (kuberuntime_sandbox.go:78)
// for what our node supports: metadata with the attempt number, the
// kubelet's labels, the pod's annotations, its DNS (dns.go, :94-98),
// hostname, log folder, host ports, the Linux namespaces, the pod's
// security context (sandboxSecurity) and its sysctls (sandboxSysctls).
// Left out: cgroup parent and resources. The error is the DNS
// configurer's: the host's resolv.conf could not be read.
func (m *Manager) SandboxConfig(ctx context.Context, pod *v1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	dnsConfig, err := m.PodDNS(ctx, pod)
	if err != nil {
		return nil, fmt.Errorf("pod DNS of %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt,
		},
		Labels:       withLabels(podLabels(pod), m.labels),
		Annotations:  pod.Annotations,
		DnsConfig:    dnsConfig,
		LogDirectory: kubekr.BuildPodLogsDirectory(m.podLogsDir, pod.Namespace, pod.Name, pod.UID),
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: sandboxSecurity(pod),
			Sysctls:         sandboxSysctls(pod),
		},
	}
	if !kubecontainer.IsHostNetworkPod(pod) {
		cfg.Hostname = podHostname(pod)
	}
	for i := range pod.Spec.Containers {
		for _, p := range kubecontainer.MakePortMappings(klog.Background(), &pod.Spec.Containers[i]) {
			if p.HostPort == 0 {
				continue // only host ports need the runtime's help
			}
			cfg.PortMappings = append(cfg.PortMappings, &runtimeapi.PortMapping{
				Protocol: toProtocol(p.Protocol), ContainerPort: int32(p.ContainerPort), HostPort: int32(p.HostPort), HostIp: p.HostIP,
			})
		}
	}
	return cfg, nil
}

// namespaceOptions is namespacesForPod (kuberuntime/util.go): each
// container gets its own PID namespace unless the pod shares one — then the
// pause process is PID 1 and a shell in a container is not, which changes
// how it reacts to SIGTERM.
func namespaceOptions(pod *v1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Ipc:     runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
	}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case pod.Spec.HostPID:
		ns.Pid = runtimeapi.NamespaceMode_NODE
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	return ns
}

func toProtocol(p v1.Protocol) runtimeapi.Protocol {
	switch p {
	case v1.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case v1.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	}
	return runtimeapi.Protocol_TCP
}

// CreateSandbox is createPodSandbox (kuberuntime_sandbox.go:38): make the
// pod's log folder, then RunPodSandbox — the runtime starts the pause
// container and calls CNI, so when it returns the pod has its IP. attempt
// counts sandboxes of this pod before this one (0 for the first).
func (m *Manager) CreateSandbox(ctx context.Context, pod *v1.Pod, attempt uint32) (string, error) {
	cfg, err := m.SandboxConfig(ctx, pod, attempt)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(cfg.LogDirectory, 0o755); err != nil {
		return "", fmt.Errorf("pod log folder: %w", err)
	}
	id, err := m.cri.RunPodSandbox(ctx, podAbout(pod).said(func(r returned) string {
		if r.err != nil {
			return ""
		}
		return fmt.Sprintf("CRI RunPodSandbox %s/%s attempt %d → %s", pod.Namespace, pod.Name, attempt, cri.ShortID(r.id))
	}), cfg)
	if err != nil {
		return "", fmt.Errorf("RunPodSandbox %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return id, nil
}

// sandboxSysctls is generatePodSandboxLinuxConfig's sysctls
// (kuberuntime_sandbox.go:179-185), their names with dots as separators:
// runc checks a name's namespace by its dots, so "kernel/shm_rmid_forced"
// would be refused — upstream converts the pod's names in place before it
// creates the sandbox (kuberuntime_manager.go:1575-1583); we convert the
// copy. Which sysctls a pod may set at all is the kubelet's admission
// (mykubelet, pkg/kubelet/sysctl's allowlist).
func sandboxSysctls(pod *v1.Pod) map[string]string {
	out := map[string]string{}
	if sc := pod.Spec.SecurityContext; sc != nil {
		for _, s := range sc.Sysctls {
			out[utilsysctl.NormalizeName(s.Name)] = s.Value
		}
	}
	return out
}
