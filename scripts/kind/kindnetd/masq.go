package main

import (
	"errors"
	"fmt"
	"log"
	"net/netip"
	"os/exec"
	"strings"
)

// masqChain is kind's chain (kind masq.go:81-82), so a node's rules read
// the same as in any kind cluster.
const masqChain = "KIND-MASQ-AGENT"

// masqRules are the nat rules of kind masq.go:104-117, in order: pod to
// pod keeps its source address (pods see each other's IPs), anything else
// leaving the node is masqueraded behind the node's address, which the
// docker network routes back. The MASQUERADE rule must stay last in the
// chain. Each is a chain and the arguments after it.
func masqRules(noMasq []netip.Prefix) [][]string {
	var rules [][]string
	for _, p := range noMasq {
		rules = append(rules, []string{masqChain, "-d", p.String(), "-j", "RETURN", "-m", "comment", "--comment", "kind-masq-agent: local traffic is not subject to MASQUERADE"})
	}
	return append(rules,
		[]string{masqChain, "-j", "MASQUERADE", "-m", "comment", "--comment", "kind-masq-agent: outbound traffic is subject to MASQUERADE (must be last in chain)"},
		[]string{"POSTROUTING", "-m", "addrtype", "!", "--dst-type", "LOCAL", "-j", masqChain, "-m", "comment", "--comment", "kind-masq-agent: ensure nat POSTROUTING directs all non-LOCAL destination traffic to our custom KIND-MASQ-AGENT chain"})
}

// iptables runs one iptables command of the nat table and returns its exit
// status (-1: it did not run) and what it printed.
type iptables func(args ...string) (int, string)

// syncMasq makes sure the chain and every rule exist, adding only what is
// missing (kind masq.go:84-118 with go-iptables' AppendUnique: -C, then
// -A): run it as often as you like, the rules appear once.
func syncMasq(ipt iptables, noMasq []netip.Prefix) error {
	if code, _ := ipt("-S", masqChain); code != 0 {
		if code, out := ipt("-N", masqChain); code != 0 {
			return fmt.Errorf("iptables -t nat -N %s: %s", masqChain, out)
		}
	}
	for _, r := range masqRules(noMasq) {
		code, out := ipt(append([]string{"-C"}, r...)...)
		if code == 0 {
			continue
		}
		if code != 1 { // 1: no such rule; anything else is a real error
			return fmt.Errorf("iptables -t nat -C %s: %s", strings.Join(r, " "), out)
		}
		if code, out := ipt(append([]string{"-A"}, r...)...); code != 0 {
			return fmt.Errorf("iptables -t nat -A %s: %s", strings.Join(r, " "), out)
		}
		log.Printf("iptables -t nat -A %s", strings.Join(r, " "))
	}
	return nil
}

// syncAllMasq runs syncMasq with iptables for the IPv4 pod subnets and
// ip6tables for the IPv6 ones (kind main.go:179-207: one agent a family).
func syncAllMasq(podSubnets []netip.Prefix) error {
	for _, prog := range []string{"iptables", "ip6tables"} {
		var family []netip.Prefix
		for _, p := range podSubnets {
			if p.Addr().Is6() == (prog == "ip6tables") {
				family = append(family, p)
			}
		}
		if len(family) > 0 {
			if err := syncMasq(execIPTables(prog), family); err != nil {
				return err
			}
		}
	}
	return nil
}

// execIPTables runs the image's iptables (its wrapper picks the host's
// back end, legacy or nft, at the first call). --wait: kube-proxy and the
// kubelet change the same tables and take /run/xtables.lock, which the
// DaemonSet mounts (go-iptables iptables.go:565-569 adds it too).
func execIPTables(prog string) iptables {
	return func(args ...string) (int, string) {
		out, err := exec.Command(prog, append(append([]string{"-t", "nat"}, args...), "--wait")...).CombinedOutput()
		msg := strings.TrimSpace(string(out))
		var exit *exec.ExitError
		switch {
		case err == nil:
			return 0, msg
		case errors.As(err, &exit):
			return exit.ExitCode(), msg
		default:
			return -1, err.Error()
		}
	}
}
