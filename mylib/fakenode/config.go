package fakenode

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/validation"
	netutils "k8s.io/utils/net"
)

// Config describes one fake node.
type Config struct {
	// NodeName is the Node object's name and the certificate's CN suffix
	// (system:node:NodeName).
	NodeName string
	// Dir holds everything of this node: kubelet root dir, pki/, logs,
	// the kubelet kubeconfig, static pods, the mock CRI's socket.
	Dir string
	// BootstrapKubeconfig holds the credentials used once, to request the
	// node's client certificate (a bootstrap token, or an admin kubeconfig).
	BootstrapKubeconfig string
	// CRIEndpoint is the runtime to use ("unix:///…"); empty = start our
	// mock CRI in-process on Dir/cri.sock.
	CRIEndpoint string
	// Address is where the kubelet server listens and Port its port.
	// Empty = the node's InternalIP and no other address (see
	// ListenAddress): the one address the apiserver dials for logs, exec
	// and port-forward. "0.0.0.0" listens on all addresses, as a real
	// kubelet does by default; "127.0.0.1" keeps it on loopback, where the
	// apiserver cannot reach it. Wherever it listens, every request needs
	// TLS, an authenticated client (certificate or token) and a
	// SubjectAccessReview that allows it; anonymous access and the
	// read-only port are off.
	Address string
	Port    int
	// NodeIP is the InternalIP the node reports; empty = Address when that
	// is one address of this machine, else the address the kubelet itself
	// would detect (see ListenAddress). Never loopback: the kubelet
	// refuses it.
	NodeIP string
	// NodeLeaseDuration is the Lease's duration; the kubelet renews it every
	// quarter of it (10 s for the default 40 s).
	NodeLeaseDuration time.Duration
	// MaxPods, CPUs and MemoryBytes describe the fake machine.
	MaxPods     int
	CPUs        int
	MemoryBytes uint64
	// ClusterDNS (IPs) and ClusterDomain are the kubelet's clusterDNS and
	// clusterDomain: the only nameservers of pods with dnsPolicy
	// ClusterFirst, and the domain they search (NS.svc.DOMAIN svc.DOMAIN
	// DOMAIN) before the host's. Empty = none and "", the kubelet's own
	// defaults: those pods then get the host's resolv.conf and a Warning
	// event MissingClusterDNS. A full cluster (one with CoreDNS) sets
	// both, as kubeadm does (10.0.0.10 here, cluster.local).
	ClusterDNS    []string
	ClusterDomain string

	// shortDir is Dir, or a short symlink to it when Dir is too long for
	// the unix sockets the kubelet creates under its root dir.
	shortDir string
}

func (c *Config) setDefaults() error {
	if c.NodeName == "" || c.Dir == "" || c.BootstrapKubeconfig == "" {
		return fmt.Errorf("fakenode: NodeName, Dir and BootstrapKubeconfig are required")
	}
	// A Node's name is a DNS subdomain. The kubelet would lowercase an
	// invalid one and register a Node nobody waits for.
	if errs := validation.IsDNS1123Subdomain(c.NodeName); len(errs) > 0 {
		return fmt.Errorf("node name %q is not valid: %s", c.NodeName, strings.Join(errs, "; "))
	}
	if err := checkClusterDNS(c.ClusterDNS, c.ClusterDomain); err != nil {
		return err
	}
	c.Address, c.NodeIP = ListenAddress(c.Address, c.NodeIP)
	if c.NodeLeaseDuration == 0 {
		c.NodeLeaseDuration = 40 * time.Second
	}
	if c.MaxPods == 0 {
		c.MaxPods = 110
	}
	if c.CPUs == 0 {
		c.CPUs = 4
	}
	if c.MemoryBytes == 0 {
		c.MemoryBytes = 8 << 30
	}
	return nil
}

// checkClusterDNS refuses what the kubelet would quietly drop: it parses
// each clusterDNS entry with netutils.ParseIPSloppy and only logs "Invalid
// clusterDNS IP" for one that is not an IP (pkg/kubelet/kubelet.go:579-587
// in v1.36.3), so the pods would silently lose that nameserver. Nor does
// the kubelet check the domain (its config validation has no rule for it):
// a bad one ends up as a search line the pods' resolver rejects.
func checkClusterDNS(servers []string, domain string) error {
	for _, s := range servers {
		if netutils.ParseIPSloppy(s) == nil {
			return fmt.Errorf("cluster DNS %q is not an IP address: want IPs such as 10.0.0.10", s)
		}
	}
	if domain != "" && len(validation.IsDNS1123Subdomain(domain)) > 0 {
		return fmt.Errorf("cluster domain %q is not a DNS domain: lowercase letters, digits, '-' and '.', e.g. cluster.local", domain)
	}
	return nil
}

// ListenAddress decides where the kubelet server listens and which
// InternalIP the node publishes, from what was given (either may be
// empty). Secure by default would be loopback, but the apiserver reaches a
// kubelet only at its InternalIP (--kubelet-preferred-address-types) and
// the real kubelet refuses a loopback node IP (validateNodeIP,
// pkg/kubelet/kubelet_node_status.go:719-720 in v1.36.3): on 127.0.0.1,
// kubectl logs and exec cannot reach the node, whatever the cluster. So
// the default is the narrowest address that works: the node IP alone, not
// all addresses (the real kubelet's --address default, 0.0.0.0).
//
//   - neither given: the address the kubelet would publish on its own — the
//     default route's, found as its NodeAddress setter finds it, with
//     utilnet.ResolveBindAddress (pkg/kubelet/nodestatus/setters.go:170) —
//     made explicit, so the server listens exactly where the node says it
//     is. With no default route there is no such address: 127.0.0.1, and
//     the kubelet is left to find a node IP (logs/exec then cannot reach
//     it, as with --address=127.0.0.1).
//   - nodeIP alone: listen there.
//   - address alone, one non-loopback address: publish it too (else the
//     kubelet might publish another address of the machine).
//   - anything else (0.0.0.0, 127.0.0.1, both given): as given.
func ListenAddress(address, nodeIP string) (listen, ip string) {
	switch a := net.ParseIP(address); {
	case address == "" && nodeIP != "":
		return nodeIP, nodeIP
	case address == "":
		host, err := utilnet.ResolveBindAddress(nil)
		if err != nil {
			return "127.0.0.1", ""
		}
		return host.String(), host.String()
	case nodeIP == "" && a != nil && !a.IsUnspecified() && !a.IsLoopback():
		return address, address
	}
	return address, nodeIP
}

// maxSocketBase is how long Dir may be: a unix socket path has at most 107
// bytes, and the kubelet's longest is <root>/kubelet/pod-resources/kubelet.sock.
const maxSocketBase = 107 - len("/kubelet/pod-resources/kubelet.sock") - 10

// shortenDir gives the node a short path to its folder. A Dir deep in a
// home folder makes DIR/kubelet/pod-resources/kubelet.sock too long
// for bind(2), and the kubelet exits (os.Exit) when its pod-resources
// socket cannot be created. A symlink in the temp folder keeps the data
// where it is and the socket paths short.
//
// The temp folder is shared by every user of the machine, so the link
// lives in a folder only we can write (see privateTempDir): nobody else can
// plant or swap the link that our sockets, keys and pods go through.
func (c *Config) shortenDir() error {
	abs, err := filepath.Abs(c.Dir)
	if err != nil {
		return err
	}
	c.Dir = abs
	if len(abs) <= maxSocketBase {
		c.shortDir = abs
		return nil
	}
	tooLong := func(err error) error {
		return fmt.Errorf("node folder %s is too long for unix sockets and a short link failed: %w; set LABS_STATE_DIR to a shorter path", abs, err)
	}
	private, err := privateTempDir()
	if err != nil {
		return tooLong(err)
	}
	sweepDanglingLinks(private)
	sum := sha256.Sum256([]byte(abs))
	link := filepath.Join(private, hex.EncodeToString(sum[:6]))
	if target, err := os.Readlink(link); err == nil && target == abs {
		c.shortDir = link
		return nil
	}
	// Replace whatever is there in one step: a new link under a temporary
	// name, renamed over the old one (rename is atomic).
	tmp := link + ".new"
	os.Remove(tmp)
	if err := os.Symlink(abs, tmp); err != nil {
		return tooLong(err)
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return tooLong(err)
	}
	c.shortDir = link
	return nil
}

// sweepDanglingLinks removes the links of node folders that no longer
// exist (a removed state folder, a finished test): the folder is ours
// alone, so nothing else can be in it.
func sweepDanglingLinks(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if e.Type()&os.ModeSymlink == 0 {
			continue
		}
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			os.Remove(p)
		}
	}
}

// privateTempDir is $TMPDIR/kubelet-labs-UID: created 0700 if missing, and
// if it exists it must be a real folder (not a symlink) owned by us with no
// access for anyone else — another user could have created it first, to
// redirect our sockets. Then we refuse instead of using it.
func privateTempDir() (string, error) {
	uid := os.Getuid()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("kubelet-labs-%d", uid))
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return "", fmt.Errorf("%s is not a folder (%s)", dir, fi.Mode().Type())
	case !ok || int(st.Uid) != uid:
		return "", fmt.Errorf("%s belongs to another user; remove it or set TMPDIR", dir)
	case fi.Mode().Perm() != 0o700:
		return "", fmt.Errorf("%s has mode %s, want 0700 (only its owner may enter it); fix it with chmod 700 %s", dir, fi.Mode().Perm(), dir)
	}
	return dir, nil
}

// Paths inside Dir.
func (c *Config) RootDir() string    { return filepath.Join(c.shortDir, "kubelet") }
func (c *Config) CertDir() string    { return filepath.Join(c.Dir, "pki") }
func (c *Config) Kubeconfig() string { return filepath.Join(c.Dir, "kubelet.kubeconfig") }
func (c *Config) CAFile() string     { return filepath.Join(c.Dir, "pki", "ca.crt") }
func (c *Config) StaticPodDir() string {
	return filepath.Join(c.Dir, "manifests")
}
func (c *Config) PodLogsDir() string { return filepath.Join(c.Dir, "pod-logs") }
func (c *Config) MockCRISocket() string {
	return filepath.Join(c.shortDir, "cri.sock")
}
