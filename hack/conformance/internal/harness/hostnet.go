package harness

import (
	"bytes"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	utilnet "k8s.io/apimachinery/pkg/util/net"

	"kubelet-labs/internal/controlplane"
	"kubelet-labs/internal/state"
)

// A full cluster (the certified suite's) changes this host's network
// namespace, which all its nodes share: kube-proxy writes the Service
// rules into its iptables, and bridged pod traffic must pass iptables so
// that a reply from a Service's pod on the same bridge is translated back
// (net.bridge.bridge-nf-call-iptables=1, which kubeadm's preflight
// demands: cmd/kubeadm/app/preflight/checks.go). hostNetwork records what
// it changed, and undo puts it back: the rules are removed with
// kube-proxy's own --cleanup, the sysctl gets its old value.
type hostNetwork struct {
	kubeProxy string // the kube-proxy binary the image carries, run on the host for --cleanup
	bridgeNF  []byte // the sysctl's value before, nil if untouched
	// podCIDR is the pods' range, whose traffic leaving it is masqueraded
	// (egressRule) while the cluster runs
	podCIDR string
}

// egressComment marks the rules hostNetwork adds itself.
const egressComment = "kubelet-labs conformance: pod egress"

// egressRules masquerade what pods send out of the pods' range to this
// host's address, as a cluster's network add-on does (kindnetd's
// masquerade agent, cmd/kindnetd: every destination outside the cluster's
// ranges): the course's CNI bridges translate nothing (ipMasq false), so
// CoreDNS, forwarding a name that is not the cluster's to this host's
// resolver, would wait for answers that cannot find their way back.
// Except the Service range: a packet to a cluster IP that kube-proxy did
// not translate (a port the Service does not have) must find nobody, as
// on any cluster — masqueraded, it would leave this host for its network,
// where something may answer (here a proxy answers every port 80: the
// spec "Services should serve endpoints on same port and different
// protocols" then saw a TCP answer from a UDP-only Service).
func (h *hostNetwork) egressRules() [][]string {
	return [][]string{
		{"-t", "nat", "POSTROUTING", "-s", h.podCIDR, "-d", controlplane.ServiceCIDR,
			"-m", "comment", "--comment", egressComment, "-j", "RETURN"},
		{"-t", "nat", "POSTROUTING", "-s", h.podCIDR, "!", "-d", h.podCIDR,
			"-m", "comment", "--comment", egressComment, "-j", "MASQUERADE"},
	}
}

// iptables runs iptables with op (-A, -D, -C) before the rule's chain.
func iptables(op string, rule []string) error {
	args := append([]string{rule[0], rule[1], op}, rule[2:]...)
	out, err := exec.Command("iptables", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

const bridgeNFCallIPTables = "/proc/sys/net/bridge/bridge-nf-call-iptables"

// hostAddress is the address of the interface of the default route, the
// one the apiserver advertises and the nodes publish: pods reach it
// through their bridge's gateway, as they reach a kubeadm node's
// (utilnet.ChooseHostInterface is what the apiserver and the kubelet pick
// by default, k8s.io/apimachinery/pkg/util/net/interface.go).
func hostAddress() (net.IP, error) {
	ip, err := utilnet.ChooseHostInterface()
	if err != nil {
		return nil, fmt.Errorf("no address of this host for the apiserver that pods can reach (default route): %w", err)
	}
	if ip.IsLoopback() {
		return nil, fmt.Errorf("this host's default route is on loopback (%s): pods could not reach the apiserver", ip)
	}
	return ip, nil
}

// prepare cleans what a killed earlier run left (kube-proxy's rules) and
// turns bridge netfilter on. Root only: Layout.RootOnly first.
func (h *hostNetwork) prepare() error {
	if err := h.cleanRules(); err != nil {
		return err
	}
	for _, r := range h.egressRules() {
		if err := iptables("-A", r); err != nil {
			return err
		}
	}
	old, err := os.ReadFile(bridgeNFCallIPTables)
	if err != nil {
		return fmt.Errorf("bridge netfilter (%s): %w; the kernel needs br_netfilter", bridgeNFCallIPTables, err)
	}
	if strings.TrimSpace(string(old)) != "1" {
		if err := os.WriteFile(bridgeNFCallIPTables, []byte("1\n"), 0o644); err != nil {
			return fmt.Errorf("turn on %s: %w", bridgeNFCallIPTables, err)
		}
		h.bridgeNF = old
	}
	return nil
}

// undo removes kube-proxy's rules and puts the sysctl back.
func (h *hostNetwork) undo() error {
	err := h.cleanRules()
	if h.bridgeNF != nil {
		if werr := os.WriteFile(bridgeNFCallIPTables, h.bridgeNF, 0o644); werr != nil && err == nil {
			err = werr
		}
		h.bridgeNF = nil
	}
	return err
}

// cleanRules removes the egress rule (every copy: a killed run may have
// left one), runs `kube-proxy --cleanup` (cmd/kube-proxy/app/server.go: it
// removes every chain and table kube-proxy makes, in iptables, ipvs and
// nftables, and exits), then checks that no KUBE-SERVICES chain is left.
func (h *hostNetwork) cleanRules() error {
	for _, r := range h.egressRules() {
		for iptables("-C", r) == nil {
			if err := iptables("-D", r); err != nil {
				return err
			}
		}
	}
	out, _ := exec.Command(h.kubeProxy, "--cleanup", "--v=0").CombinedOutput()
	left, err := exec.Command("iptables-save", "-t", "nat").Output()
	if err != nil {
		return fmt.Errorf("iptables-save: %w (apt-get install iptables)", err)
	}
	if bytes.Contains(left, []byte(":KUBE-SERVICES")) {
		return fmt.Errorf("kube-proxy --cleanup left its chains in this host's nat table:\n%s", out)
	}
	return nil
}

// nodeAddress is the address a node of a full cluster serves on and
// publishes as its InternalIP: its containerd's bridge gateway (the first
// address of its pod subnet, which the bridge CNI plugin's isGateway puts
// on the bridge). Not the host's address: that is the apiserver's, and
// lab 18 rightly refuses a serving certificate for it (with it a node could
// answer as the apiserver). So each node has an address of its own, as
// nodes on machines of their own have, reachable from this host and from
// every pod through it. The bridge exists once the CNI plugin made the
// first pod's network; before that, it is made here, as the plugin would
// make it (a bridge named CNI_BRIDGE with the gateway address, up), and
// the plugin adopts it.
func nodeAddress(rt Runtime) (string, error) {
	_, sub, err := net.ParseCIDR(rt.Env.Subnet)
	if err != nil || sub.IP.To4() == nil || rt.Env.Bridge == "" {
		return "", fmt.Errorf("containerd %s names no IPv4 pod subnet and bridge (CNI_SUBNET %q, CNI_BRIDGE %q in %s)", rt.Sock, rt.Env.Subnet, rt.Env.Bridge, rt.Env.File)
	}
	gw := make(net.IP, 4)
	copy(gw, sub.IP.To4())
	gw[3]++
	ones, _ := sub.Mask.Size()
	if _, err := net.InterfaceByName(rt.Env.Bridge); err != nil {
		for _, args := range [][]string{
			{"link", "add", rt.Env.Bridge, "type", "bridge"},
			{"addr", "add", fmt.Sprintf("%s/%d", gw, ones), "dev", rt.Env.Bridge},
			{"link", "set", rt.Env.Bridge, "up"},
		} {
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				return "", fmt.Errorf("make bridge %s for containerd %s: ip %s: %v: %s", rt.Env.Bridge, rt.Sock, strings.Join(args, " "), err, out)
			}
		}
	}
	iface, err := net.InterfaceByName(rt.Env.Bridge)
	if err != nil {
		return "", err
	}
	addrs, err := iface.Addrs()
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.Equal(gw) {
			return gw.String(), nil
		}
	}
	return "", fmt.Errorf("bridge %s of containerd %s does not hold its gateway %s (addresses %v)", rt.Env.Bridge, rt.Sock, gw, addrs)
}

// RootOnly is rootOnly for a run's files: the checkout without the state
// folder, and of the state folder what a run executes or loads (the
// builds, their sources, the images, lab 00's binaries) — not the labs'
// and runs' pod volumes, owned by whatever user a pod asked for: data of
// the run, never run by it. A full run calls it before it builds anything.
func (l *Layout) RootOnly() error {
	stateRoot, err := state.Dir()
	if err != nil {
		return err
	}
	return rootOnly([]string{l.Repo, l.BinDir, l.ImageDir, filepath.Join(l.Dir, "src"), l.ControlPlaneBinDir}, []string{stateRoot})
}

// rootOnly says whether this process may change the host's network for a
// full cluster: it must be root (kube-proxy's rules, the sysctl), and as
// root it builds and runs programs of the checkout and writes the state
// folder — the course's rule for anything run as root is to trust no file
// a non-root user could have written (scripts/containerd/lib.sh
// check_root_chain does the same for containerd-up.sh). So every tree
// given (the checkout, the state folder) and the folders above them must
// be root's and writable by no one else: a clone root made (CI, an
// instructor's machine), not a learner's.
// skip names folders the walks leave out.
func rootOnly(trees, skip []string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("a full cluster changes this host's network (kube-proxy's iptables rules, bridge netfilter): run it as root, from a checkout root owns (git clone as root; CI does)")
	}
	for _, tree := range trees {
		if _, err := os.Lstat(tree); os.IsNotExist(err) {
			continue
		}
		for d := filepath.Dir(tree); ; d = filepath.Dir(d) {
			if err := rootsAlone(d); err != nil {
				return err
			}
			if d == "/" {
				break
			}
		}
		err := filepath.WalkDir(tree, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.Type()&fs.ModeSymlink != 0 {
				return nil // its target is checked where the walk meets it, or is outside
			}
			if err := rootsAlone(p); err != nil {
				return err
			}
			for _, s := range skip {
				if e.IsDir() && p == s {
					return filepath.SkipDir
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// rootsAlone refuses a file or folder that is not root's or that others
// may write (a sticky folder such as /tmp is fine above the tree).
func rootsAlone(p string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no owner", p)
	}
	writable := fi.Mode().Perm()&0o022 != 0 && !(fi.IsDir() && fi.Mode()&os.ModeSticky != 0)
	if st.Uid != 0 || writable {
		return fmt.Errorf("%s is owned by uid %d with mode %s: as root, a full cluster runs only what no other user could have written; use a checkout (and LABS_STATE_DIR) root owns", p, st.Uid, fi.Mode())
	}
	return nil
}
