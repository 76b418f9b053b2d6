package kuberuntime

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/network/dns"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
)

// The pod's resolv.conf is upstream's own: the kubelet's DNS configurer,
// pkg/kubelet/network/dns (dns.go), imported as is — it is already in our
// build through the packages this one imports, and its constructor takes
// plain values. What it does for a pod (GetPodDNS, dns.go:386-450):
//
//   - dnsPolicy ClusterFirst (the default) and ClusterFirstWithHostNet:
//     the cluster's DNS servers only, search NS.svc.DOMAIN svc.DOMAIN DOMAIN
//     then the host's search domains (:165-176), options ndots:5 (:44);
//   - ClusterFirst with hostNetwork: as Default (getPodDNSType, :311-316);
//   - ClusterFirst without clusterDNS: as Default, with a Warning event
//     MissingClusterDNS on the node and on the pod (:416-422);
//   - Default: the host's resolv.conf — its nameservers, last search line
//     and options (parseResolvConf, :226-275);
//   - None: nothing but the pod's spec.dnsConfig (:399-401);
//   - then spec.dnsConfig appended: servers and searches without
//     duplicates, options merged by name, the pod's winning (appendDNSConfig
//     :378-383, mergeDNSOptions :327-353);
//   - and the limits (:102-163): at most 3 nameservers, 32 search paths
//     of at most 253 characters and 2048 in all
//     (pkg/apis/core/validation/validation.go:4129-4133), the rest dropped
//     with a Warning event DNSConfigForming.
//
// The runtime writes the result as the sandbox's /etc/resolv.conf, which
// every container of the pod mounts (containerd: parseDNSOptions in
// internal/cri/server/podsandbox/sandbox_run_linux.go).

// newDNSConfigurer is the kubelet's dns.NewConfigurer call
// (pkg/kubelet/kubelet.go:615) with its node reference (:555-560): events
// about the node name it, not a UID. No node IPs: only a resolvConf of ""
// reads them (dns.go:431-443, nameserver 127.0.0.1), which Options does
// not offer — its "" is the kubelet's default file.
func newDNSConfigurer(o Options) *dns.Configurer {
	resolvConf := o.ResolvConf
	if resolvConf == "" {
		resolvConf = kubetypes.ResolvConfDefault
	}
	nodeRef := &v1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: o.NodeName}
	return dns.NewConfigurer(withLogger(o.Recorder), nodeRef, nil, o.ClusterDNS, o.ClusterDomain, resolvConf)
}

// PodDNS is the DNS configuration the pod's sandbox gets (GetPodDNS,
// kubelet_network.go:56): an error only when the host's resolv.conf cannot
// be read, which fails the sandbox as upstream's generatePodSandboxConfig
// does (kuberuntime_sandbox.go:94-98).
func (m *Manager) PodDNS(ctx context.Context, pod *v1.Pod) (*runtimeapi.DNSConfig, error) {
	return m.dns.GetPodDNS(ctx, pod)
}

// ClusterDomain is the node's cluster domain (Options.ClusterDomain).
func (m *Manager) ClusterDomain() string { return m.dns.ClusterDomain }

// withLogger gives our recorder the WithLogger upstream's configurer
// calls before each event (record.EventRecorderLogger): the node's
// recorder logs on its own. nil records nothing — a FakeRecorder with no
// channel drops every event.
func withLogger(r record.EventRecorder) record.EventRecorderLogger {
	switch r := r.(type) {
	case nil:
		return &record.FakeRecorder{}
	case record.EventRecorderLogger:
		return r
	default:
		return loggerRecorder{r}
	}
}

type loggerRecorder struct{ record.EventRecorder }

func (r loggerRecorder) WithLogger(klog.Logger) record.EventRecorderLogger { return r }
