package main

import (
	"fmt"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name, ip string, cidrs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	n.Spec.PodCIDRs = cidrs
	if len(cidrs) > 0 {
		n.Spec.PodCIDR = cidrs[0]
	}
	for _, a := range []string{ip, "fc00:f853:ccd:e793::" + name[len(name)-1:]} {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
	}
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
	return n
}

func r(dst, gw string) route { return route{netip.MustParsePrefix(dst), netip.MustParseAddr(gw)} }

// Every other node's podCIDRs via its InternalIP of the same family; none
// for this node (HOST_IP) and none for a node without a podCIDR yet.
func TestWantRoutes(t *testing.T) {
	nodes := []*corev1.Node{
		node("cp1", "172.18.0.2", "10.244.0.0/24", "fd00:10:244::/64"), // this node
		node("w2", "172.18.0.3", "10.244.1.0/24", "fd00:10:244:1::/64"),
		node("w3", "172.18.0.4"), // no podCIDR yet
		node("w4", "172.18.0.5", "10.244.2.0/24"),
	}
	got := fmt.Sprint(wantRoutes(nodes, netip.MustParseAddr("172.18.0.2")))
	want := "[10.244.1.0/24 via 172.18.0.3 fd00:10:244:1::/64 via fc00:f853:ccd:e793::2 10.244.2.0/24 via 172.18.0.5]"
	if got != want {
		t.Errorf("wantRoutes:\n got %s\nwant %s", got, want)
	}
}

// What changes: missing routes are added; a route into the pod subnet via
// a wrong gateway (the podCIDR moved to a new node) or to a podCIDR no
// node has (a deleted node) goes. Routes without a gateway (the ptp
// plugin's to local pods) and outside the pod subnet are not ours.
func TestDiffRoutes(t *testing.T) {
	pods := []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
	want := []route{r("10.244.1.0/24", "172.18.0.3"), r("10.244.2.0/24", "172.18.0.5")}
	have := []route{
		r("10.244.1.0/24", "172.18.0.3"), // right: kept
		r("10.244.2.0/24", "172.18.0.9"), // wrong gateway
		r("10.244.7.0/24", "172.18.0.7"), // a deleted node's
		r("0.0.0.0/0", "172.18.0.1"),     // the default route: not ours
		r("192.168.0.0/24", "172.18.0.3"),
		{Dst: netip.MustParsePrefix("10.244.0.5/32")}, // a local pod's veth route
	}
	add, del := diffRoutes(want, have, pods)
	if got, want := fmt.Sprint(add), "[10.244.2.0/24 via 172.18.0.5]"; got != want {
		t.Errorf("add: %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(del), "[10.244.2.0/24 via 172.18.0.9 10.244.7.0/24 via 172.18.0.7]"; got != want {
		t.Errorf("del: %s, want %s", got, want)
	}
	// in step: nothing to do
	if add, del := diffRoutes(want, want, pods); len(add)+len(del) != 0 {
		t.Errorf("diff of want with itself: add %v del %v, want none", add, del)
	}
}
