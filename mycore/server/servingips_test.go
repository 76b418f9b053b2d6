package server_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/node"
	"kubelet-labs/mycore/server"
)

// TestServingApproverRefusesClusterIPs: a node writes its own addresses,
// so "the IP is the Node's" proves nothing. A node that publishes the
// "kubernetes" service's ClusterIP (10.0.0.1 on our control plane) as its
// InternalIP must not get a certificate for it signed by the cluster CA;
// nor may a node get 127.0.0.1 unless the cluster runs on loopback by
// design.
func TestServingApproverRefusesClusterIPs(t *testing.T) {
	testenv.ControlPlane(t)
	t.Setenv(state.EnvVar, t.TempDir())
	cfg := testenv.AdminConfig(t)
	admin := testenv.AdminClient(t)
	ca := caPEM(t, cfg)
	ctx := context.Background()

	join := func(name, ip string) *node.Joined {
		t.Helper()
		j, err := node.Join(ctx, node.JoinOptions{Admin: cfg, Dir: testenv.NodeDir(t, name), Name: name, Lab: "server-test", InternalIP: ip, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(j.Stop)
		return j
	}
	ask := func(j *node.Joined, ip string, o server.ApproverOptions) error {
		_, err := server.ServingCertificate(ctx, server.ServingCertOptions{NodeName: j.Node.Name, Client: j.Client,
			IPs: []net.IP{net.ParseIP(ip)}, Dir: j.Dir, CA: ca, Approve: server.AdminApprover(admin, o), Timeout: 10 * time.Second})
		return err
	}

	svc := join("srv-svc-ip", "10.0.0.1")
	if err := ask(svc, "10.0.0.1", server.ApproverOptions{APIServer: cfg.Host, LoopbackByDesign: true}); err == nil || !strings.Contains(err.Error(), "IP 10.0.0.1 is in the service range 10.0.0.0/24") {
		t.Errorf("a Node claiming the kubernetes service's ClusterIP: %v; want the approver to refuse it", err)
	}

	lo := join("srv-loopback", "127.0.0.1")
	if err := ask(lo, "127.0.0.1", server.ApproverOptions{APIServer: cfg.Host}); err == nil || !strings.Contains(err.Error(), "IP 127.0.0.1 is loopback") {
		t.Errorf("127.0.0.1 without LoopbackByDesign: %v; want the approver to refuse it", err)
	}
	if err := ask(lo, "127.0.0.1", server.ApproverOptions{APIServer: cfg.Host, LoopbackByDesign: true}); err != nil {
		t.Errorf("127.0.0.1 with the apiserver on loopback, by design: %v", err)
	}

	// The policy as read from this cluster.
	p, err := server.ClusterServingIPPolicy(ctx, admin, cfg.Host, true)
	if err != nil {
		t.Fatal(err)
	}
	for ip, want := range map[string]string{
		"10.0.0.77":   "in the service range 10.0.0.0/24",
		"127.0.0.1":   "",
		"192.0.2.10":  "",
		"0.0.0.0":     "is not a host's address",
		"224.0.0.251": "is not a host's address",
	} {
		err := p.Refuse(net.ParseIP(ip))
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("Refuse(%s) = %v; want %q", ip, err, want)
		}
	}
	// An apiserver dialled elsewhere: its IP is refused, and loopback is
	// never by design (that apiserver cannot dial our loopback).
	p, err = server.ClusterServingIPPolicy(ctx, admin, "https://192.0.2.10:6443", true)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Refuse(net.ParseIP("192.0.2.10")); err == nil || !strings.Contains(err.Error(), "the apiserver's own address") {
		t.Errorf("the apiserver's IP: %v", err)
	}
	if err := p.Refuse(net.ParseIP("127.0.0.1")); err == nil {
		t.Errorf("127.0.0.1 with the apiserver on 192.0.2.10: allowed")
	}
}
