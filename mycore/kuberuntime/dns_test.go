package kuberuntime_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/mycore/kuberuntime"
)

// sandboxConfig is the Manager's sandbox config for pod's first sandbox;
// an error fails the test.
func sandboxConfig(t testing.TB, m *kuberuntime.Manager, pod *v1.Pod) *runtimeapi.PodSandboxConfig {
	t.Helper()
	cfg, err := m.SandboxConfig(context.Background(), pod, 0)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// hostResolvConf is the node's resolv.conf in these tests: two
// nameservers, two search domains (the last search line wins) and an
// option.
const hostResolvConf = `# written by the test
nameserver 192.0.2.53
nameserver 192.0.2.54
search old.example
search corp.example lab.example
options timeout:2
`

// dnsManager is a Manager that only computes (no runtime), with the
// kubelet's DNS settings: clusterDNS (none when ""), clusterDomain, and
// hostResolvConf as its resolvConf. Its events go to the returned
// recorder.
func dnsManager(t *testing.T, clusterDNS, clusterDomain string) (*kuberuntime.Manager, *record.FakeRecorder) {
	t.Helper()
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte(hostResolvConf), 0o644); err != nil {
		t.Fatal(err)
	}
	var servers []net.IP
	if clusterDNS != "" {
		servers = []net.IP{net.ParseIP(clusterDNS)}
	}
	events := record.NewFakeRecorder(20)
	return kuberuntime.New(nil, kuberuntime.Options{PodLogsDir: t.TempDir(), ClusterDNS: servers, ClusterDomain: clusterDomain,
		ResolvConf: resolv, NodeName: "node-1", Recorder: events}), events
}

func dnsPod(policy v1.DNSPolicy, hostNetwork bool, cfg *v1.PodDNSConfig) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "uid-1"},
		Spec:       v1.PodSpec{DNSPolicy: policy, HostNetwork: hostNetwork, DNSConfig: cfg, Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}
}

// resolvConf is what the runtime writes as the pod's /etc/resolv.conf
// (containerd's parseDNSOptions: search, nameservers, options), the
// options sorted: upstream merges them through a map, so their order is
// not fixed.
func resolvConf(c *runtimeapi.DNSConfig) string {
	if c == nil {
		return "(no DNS config: the runtime copies its host's file)"
	}
	var b strings.Builder
	if len(c.Searches) > 0 {
		b.WriteString("search " + strings.Join(c.Searches, " ") + "\n")
	}
	for _, s := range c.Servers {
		b.WriteString("nameserver " + s + "\n")
	}
	if len(c.Options) > 0 {
		b.WriteString("options " + strings.Join(slices.Sorted(slices.Values(c.Options)), " ") + "\n")
	}
	return b.String()
}

// Every dnsPolicy gives the sandbox the resolv.conf upstream's kubelet
// gives it (pkg/kubelet/network/dns/dns.go:386-450), with clusterDNS
// 10.0.0.10 and clusterDomain cluster.local.
func TestSandboxDNSByPolicy(t *testing.T) {
	const (
		cluster = "search shop.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example\nnameserver 10.0.0.10\noptions ndots:5\n"
		host    = "search corp.example lab.example\nnameserver 192.0.2.53\nnameserver 192.0.2.54\noptions timeout:2\n"
	)
	two := "2"
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want string
	}{
		{"ClusterFirst: the cluster's DNS, its search list before the host's, ndots:5", dnsPod(v1.DNSClusterFirst, false, nil), cluster},
		{"ClusterFirst on the host network: the host's (Default)", dnsPod(v1.DNSClusterFirst, true, nil), host},
		{"ClusterFirstWithHostNet on the host network: the cluster's", dnsPod(v1.DNSClusterFirstWithHostNet, true, nil), cluster},
		{"Default: the host's resolv.conf", dnsPod(v1.DNSDefault, false, nil), host},
		{"None: the pod's dnsConfig only", dnsPod(v1.DNSNone, false, &v1.PodDNSConfig{
			Nameservers: []string{"203.0.113.1"}, Searches: []string{"my.example"}, Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: &two}},
		}), "search my.example\nnameserver 203.0.113.1\noptions ndots:2\n"},
		{"None without dnsConfig: an empty file", dnsPod(v1.DNSNone, false, nil), ""},
		{"ClusterFirst + dnsConfig: appended without duplicates, the pod's options win", dnsPod(v1.DNSClusterFirst, false, &v1.PodDNSConfig{
			Nameservers: []string{"203.0.113.1", "10.0.0.10"},
			Searches:    []string{"svc.cluster.local", "my.example"},
			Options:     []v1.PodDNSConfigOption{{Name: "ndots", Value: &two}, {Name: "edns0"}},
		}), "search shop.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example my.example\nnameserver 10.0.0.10\nnameserver 203.0.113.1\noptions edns0 ndots:2\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := dnsManager(t, "10.0.0.10", "cluster.local")
			if got := resolvConf(sandboxConfig(t, m, tc.pod).GetDnsConfig()); got != tc.want {
				t.Errorf("the pod's /etc/resolv.conf would be:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// A kubelet with no clusterDNS (the kubelet's default) gives a
// ClusterFirst pod the host's DNS and says so: a Warning
// MissingClusterDNS on the node and one on the pod (dns.go:416-422).
func TestSandboxDNSClusterFirstWithoutClusterDNS(t *testing.T) {
	m, events := dnsManager(t, "", "cluster.local")
	got := resolvConf(sandboxConfig(t, m, dnsPod(v1.DNSClusterFirst, false, nil)).GetDnsConfig())
	if want := "search corp.example lab.example\nnameserver 192.0.2.53\nnameserver 192.0.2.54\noptions timeout:2\n"; got != want {
		t.Errorf("resolv.conf:\n%s\nwant the host's:\n%s", got, want)
	}
	const msg = `kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.`
	wantEvents := []string{
		"Warning MissingClusterDNS " + msg,
		`Warning MissingClusterDNS pod: "web_shop(uid-1)". ` + msg,
	}
	for _, want := range wantEvents {
		select {
		case ev := <-events.Events:
			if ev != want {
				t.Errorf("event %q, want %q", ev, want)
			}
		default:
			t.Errorf("no event %q", want)
		}
	}
}

// With no clusterDomain (the kubelet's default "") a ClusterFirst pod's
// search list is the host's alone (dns.go:166-168).
func TestSandboxDNSWithoutClusterDomain(t *testing.T) {
	m, _ := dnsManager(t, "10.0.0.10", "")
	got := resolvConf(sandboxConfig(t, m, dnsPod(v1.DNSClusterFirst, false, nil)).GetDnsConfig())
	if want := "search corp.example lab.example\nnameserver 10.0.0.10\noptions ndots:5\n"; got != want {
		t.Errorf("resolv.conf:\n%s\nwant:\n%s", got, want)
	}
}

// What resolvers cannot take is cut, with a Warning DNSConfigForming on
// the pod (dns.go:102-163): at most 3 nameservers, no search path longer
// than 253 characters, at most 32 paths.
func TestSandboxDNSLimits(t *testing.T) {
	m, events := dnsManager(t, "10.0.0.10", "cluster.local")
	long := strings.Repeat("a", 250) + ".example"
	var many []string
	for i := range 40 {
		many = append(many, fmt.Sprintf("d%02d.example", i))
	}
	pod := dnsPod(v1.DNSDefault, false, &v1.PodDNSConfig{Nameservers: []string{"203.0.113.1", "203.0.113.2"}, Searches: append([]string{long}, many...)})
	c := sandboxConfig(t, m, pod).GetDnsConfig()
	if want := []string{"192.0.2.53", "192.0.2.54", "203.0.113.1"}; !slices.Equal(c.Servers, want) {
		t.Errorf("nameservers %v, want the first 3 %v", c.Servers, want)
	}
	if len(c.Searches) > 32 || slices.Contains(c.Searches, long) {
		t.Errorf("%d search paths (want at most 32), the 258-character one kept: %v", len(c.Searches), slices.Contains(c.Searches, long))
	}
	var reasons []string
	for len(events.Events) > 0 {
		reasons = append(reasons, <-events.Events)
	}
	if len(reasons) != 2 || !strings.HasPrefix(reasons[0], "Warning DNSConfigForming Nameserver limits were exceeded") ||
		!strings.HasPrefix(reasons[1], "Warning DNSConfigForming Search Line limits were exceeded") {
		t.Errorf("events %q, want DNSConfigForming for the nameservers, then for the search line", reasons)
	}
}

// A host resolv.conf that cannot be read fails the sandbox, as upstream's
// generatePodSandboxConfig does (kuberuntime_sandbox.go:94-98), and says
// which file.
func TestSandboxDNSUnreadableResolvConf(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-resolv.conf")
	m := kuberuntime.New(nil, kuberuntime.Options{PodLogsDir: t.TempDir(), ResolvConf: missing})
	_, err := m.SandboxConfig(context.Background(), dnsPod(v1.DNSDefault, false, nil), 0)
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("got %v, want an error naming %s", err, missing)
	}
}
