package main

import (
	"context"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kubelet-labs/internal/critest"
	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
)

// TestClusterDNSOnContainerd: with --cluster-dns 10.0.0.10 and
// --cluster-domain cluster.local (what kubeadm and the conformance run
// give a kubelet), a pod with the default dnsPolicy ClusterFirst resolves
// through the cluster's DNS only — `kubectl exec … cat /etc/resolv.conf`
// shows nameserver 10.0.0.10 and the search list of its namespace's
// services — and a pod with spec.subdomain is named in the cluster domain
// in its /etc/hosts.
func TestClusterDNSOnContainerd(t *testing.T) {
	testenv.NoLeaks(t)
	critest.Require(t, slices.Contains(critest.Flavours(), "2.2") || !critest.InCI(), "containerd 2.2 is not under test (LABS_CONTAINERD)")
	rt := critest.ContainerdFlavour(t, "2.2")
	const node = "t18-dns"
	cp := testenv.ControlPlane(t)
	dir := t.TempDir()
	t.Setenv(state.EnvVar, dir)
	o := options{kubeconfig: cp.AdminKubeconfig(), nodeName: node,
		runtime: labruntime.Flags{Kind: "containerd-2.2", Endpoint: rt.Endpoint, PodLogsDir: filepath.Join(dir, "pod-logs")},
		address: "127.0.0.1", relist: time.Second, backOffInit: time.Second, backOffMax: 4 * time.Second,
		shutdownGrace: 10 * time.Second, timeout: time.Minute,
		clusterDNS: "10.0.0.10", clusterDomain: "cluster.local"}
	testenv.StartLab(t, func(ctx context.Context, out io.Writer, onReady func(*nodeLab)) error {
		return run(ctx, o, labenv.NewPrinter(out), onReady)
	})
	admin := testenv.AdminClient(t)
	ns := testenv.Namespace(t, admin, "lab18-dns")
	testenv.WaitServiceAccount(t, admin, ns)
	create(t, admin, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: v1.PodSpec{
			NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](1),
			Hostname: "app", Subdomain: "web",
			Containers: []v1.Container{{Name: "main", Image: rt.BusyboxImage, Command: []string{"sleep", "3600"}}},
		},
	})
	waitPod(t, admin, ns, "app", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })

	cat := func(file string) string {
		t.Helper()
		out, errOut, code := testenv.Kubectl(t, "", "-n", ns, "exec", "app", "--", "cat", file)
		if code != 0 {
			t.Fatalf("kubectl exec app -- cat %s: exit %d: %s%s", file, code, out, errOut)
		}
		return out
	}
	// This machine's search domains, if it has any, come after the
	// cluster's (dns.go:165-176): the line starts with the cluster's.
	resolv := cat("/etc/resolv.conf")
	var servers []string
	search, options := "", ""
	for _, l := range strings.Split(strings.TrimSpace(resolv), "\n") {
		switch f := strings.Fields(l); {
		case len(f) > 1 && f[0] == "nameserver":
			servers = append(servers, f[1])
		case len(f) > 0 && f[0] == "search":
			search = l
		case len(f) > 0 && f[0] == "options":
			options = l
		}
	}
	wantSearch := "search " + ns + ".svc.cluster.local svc.cluster.local cluster.local"
	if !slices.Equal(servers, []string{"10.0.0.10"}) || (search != wantSearch && !strings.HasPrefix(search, wantSearch+" ")) || options != "options ndots:5" {
		t.Errorf("/etc/resolv.conf in the pod:\n%s\nwant nameserver 10.0.0.10 alone, %q (then this machine's domains) and options ndots:5", resolv, wantSearch)
	}
	if hosts, want := cat("/etc/hosts"), "\tapp.web."+ns+".svc.cluster.local\tapp\n"; !strings.Contains(hosts, want) {
		t.Errorf("/etc/hosts in the pod:\n%s\nhas no line ending %q", hosts, want)
	}
}

// A bad --cluster-dns or --cluster-domain is refused at once, in one line
// that names the flag.
func TestClusterDNSFlagErrors(t *testing.T) {
	base := options{nodeName: "t18-bad", relist: time.Second, backOffInit: time.Second, backOffMax: time.Second, timeout: time.Second}
	for _, tc := range []struct {
		set  func(o *options)
		want string
	}{
		{func(o *options) { o.clusterDNS = "10.0.0.10,ten" }, `--cluster-dns "ten" is not an IP address: want comma-separated IPs, e.g. 10.0.0.10`},
		{func(o *options) { o.clusterDNS = "10.0.0.10," }, `--cluster-dns "" is not an IP address`},
		{func(o *options) { o.clusterDomain = "Cluster_Local" }, `--cluster-domain "Cluster_Local" is not a DNS domain`},
	} {
		o := base
		tc.set(&o)
		err := o.check()
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("got %v, want one line that starts %q", err, tc.want)
		}
	}
	ok := base
	ok.clusterDNS, ok.clusterDomain = "10.0.0.10, fd00::a", "cluster.local"
	if err := ok.check(); err != nil {
		t.Errorf("--cluster-dns %q --cluster-domain %q: %v", ok.clusterDNS, ok.clusterDomain, err)
	}
}
