package main

import (
	"fmt"
	"log"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
)

// route is one kernel route this program manages: a podCIDR via a node.
type route struct {
	Dst netip.Prefix
	Gw  netip.Addr
}

func (r route) String() string { return r.Dst.String() + " via " + r.Gw.String() }

// internalIPs are the node's InternalIP addresses (kind main.go:361-371).
func internalIPs(n *corev1.Node) []netip.Addr {
	var ips []netip.Addr
	for _, a := range n.Status.Addresses {
		if ip, err := netip.ParseAddr(a.Address); err == nil && a.Type == corev1.NodeInternalIP {
			ips = append(ips, ip)
		}
	}
	return ips
}

// podCIDRs are the ranges the node controller gave the node; spec.podCIDR
// alone on a node from before spec.podCIDRs (kind main.go:313-319).
func podCIDRs(n *corev1.Node) []netip.Prefix {
	s := n.Spec.PodCIDRs
	if len(s) == 0 && n.Spec.PodCIDR != "" {
		s = []string{n.Spec.PodCIDR}
	}
	var ps []netip.Prefix
	for _, c := range s {
		if p, err := netip.ParsePrefix(c); err == nil {
			ps = append(ps, p.Masked())
		}
	}
	return ps
}

// wantRoutes mirrors kind main.go:290-359: for every node but this one
// (the node with HOST_IP as an InternalIP), each of its podCIDRs via its
// InternalIP of the same family. A node without a podCIDR yet gets none.
func wantRoutes(nodes []*corev1.Node, self netip.Addr) []route {
	var want []route
	for _, n := range nodes {
		ips := internalIPs(n)
		if slices.Contains(ips, self) {
			continue
		}
		for _, p := range podCIDRs(n) {
			for _, ip := range ips {
				if ip.Is6() == p.Addr().Is6() {
					want = append(want, route{p, ip})
					break // kind: one address per family
				}
			}
		}
	}
	return want
}

// diffRoutes says what to change so that the routes into the pod subnets
// that go via a gateway are exactly want. kind routes.go:27-69 deletes a
// route to a wanted podCIDR via another gateway; this also deletes one to
// a podCIDR no node has any more (a deleted node's), which kind leaves.
// Routes without a gateway (the ptp plugin's, one per local pod) and
// routes outside the pod subnets are never touched.
func diffRoutes(want, have []route, podSubnets []netip.Prefix) (add, del []route) {
	for _, r := range have {
		inPods := slices.ContainsFunc(podSubnets, func(s netip.Prefix) bool {
			return s.Bits() <= r.Dst.Bits() && s.Contains(r.Dst.Addr())
		})
		if r.Gw.IsValid() && inPods && !slices.Contains(want, r) {
			del = append(del, r)
		}
	}
	for _, r := range want {
		if !slices.Contains(have, r) {
			add = append(add, r)
		}
	}
	return add, del
}

// syncRoutes applies diffRoutes to the kernel's main table.
func syncRoutes(want []route, podSubnets []netip.Prefix) error {
	list, err := netlink.RouteList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("listing routes: %w", err)
	}
	var have []route
	for _, r := range list {
		if r.Dst == nil || r.Gw == nil {
			continue
		}
		dst, _ := netip.AddrFromSlice(r.Dst.IP)
		gw, _ := netip.AddrFromSlice(r.Gw)
		bits, _ := r.Dst.Mask.Size()
		have = append(have, route{netip.PrefixFrom(dst.Unmap(), bits), gw.Unmap()})
	}
	add, del := diffRoutes(want, have, podSubnets)
	for _, r := range del {
		log.Printf("route del %s", r)
		if err := netlink.RouteDel(r.netlink()); err != nil {
			return fmt.Errorf("route del %s: %w", r, err)
		}
	}
	for _, r := range add {
		log.Printf("route add %s", r)
		if err := netlink.RouteReplace(r.netlink()); err != nil {
			return fmt.Errorf("route add %s: %w", r, err)
		}
	}
	return nil
}

func (r route) netlink() *netlink.Route {
	return &netlink.Route{
		Dst: &net.IPNet{IP: r.Dst.Addr().AsSlice(), Mask: net.CIDRMask(r.Dst.Bits(), r.Dst.Addr().BitLen())},
		Gw:  r.Gw.AsSlice(),
	}
}
