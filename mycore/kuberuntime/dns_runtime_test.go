package kuberuntime_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"kubelet-labs/internal/critest"
	"kubelet-labs/mycore/kuberuntime"
)

// The runtime writes the sandbox's DNS config as /etc/resolv.conf, and a
// container sees it: with clusterDNS 10.0.0.10 and clusterDomain
// cluster.local a ClusterFirst pod resolves through the cluster's DNS
// only, searching its namespace's services first, then the host's search
// domains; a dnsPolicy Default pod gets the host's file. The same on
// containerd 2.2, 1.6 and the mock runtime.
func TestResolvConfInTheContainer(t *testing.T) {
	noLeaks(t)
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 192.0.2.53\nsearch corp.example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, rc := range critest.Cases() {
		t.Run(rc.Name, func(t *testing.T) {
			t.Parallel()
			e := &killEnv{rt: rc.Setup(t), logDir: t.TempDir()}
			e.cri = critest.Dial(t, e.rt)
			e.m = kuberuntime.New(e.cri, kuberuntime.Options{PodLogsDir: e.logDir,
				ClusterDNS: []net.IP{net.ParseIP("10.0.0.10")}, ClusterDomain: "cluster.local", ResolvConf: resolv})
			for _, tc := range []struct {
				policy v1.DNSPolicy
				want   string
			}{
				{v1.DNSClusterFirst, "search kill-test.svc.cluster.local svc.cluster.local cluster.local corp.example\nnameserver 10.0.0.10\noptions ndots:5\n"},
				{v1.DNSDefault, "search corp.example\nnameserver 192.0.2.53\n"},
			} {
				pod := killPod("dns", 0, ctr("app", "echo ready; sleep 600"))
				pod.Spec.DNSPolicy = tc.policy
				_, ids := e.start(t, pod)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				res, err := e.cri.Exec(ctx, ids["app"], []string{"cat", "/etc/resolv.conf"}, 20*time.Second)
				cancel()
				if err != nil {
					t.Fatalf("exec cat /etc/resolv.conf: %v", err)
				}
				if got := string(res.Stdout); got != tc.want {
					t.Errorf("dnsPolicy %s: /etc/resolv.conf in the container is\n%s\nwant\n%s", tc.policy, got, tc.want)
				}
			}
		})
	}
}
