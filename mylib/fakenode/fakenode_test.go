package fakenode

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// bootstrapKubeconfig is enough for Start's checks before the kubelet
// runs: a cluster with a CA.
func bootstrapKubeconfig(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "bootstrap.kubeconfig")
	const kc = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:1
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=
users:
- name: u
  user: {token: abc}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`
	if err := os.WriteFile(p, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSecondProcessForOneNodeIsRefused: while a node runs from a folder
// (its lock is held), starting it again fails with the holder's pid and
// touches nothing.
func TestSecondProcessForOneNodeIsRefused(t *testing.T) {
	dir := t.TempDir()
	first, err := lockNode(dir, "n1")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	_, err = Start(context.Background(), Config{NodeName: "n1", Dir: dir, BootstrapKubeconfig: bootstrapKubeconfig(t)})
	var running *AlreadyRunningError
	if !errors.As(err, &running) || running.Pid != strconv.Itoa(os.Getpid()) {
		t.Fatalf("Start = %v, want AlreadyRunningError naming pid %d", err, os.Getpid())
	}
	if !strings.Contains(err.Error(), "already running") {
		t.Errorf("message: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pki")); err == nil {
		t.Error("the refused start created the node's folders")
	}
	// Once the holder is gone (its process died: the kernel drops flocks),
	// the node can start again.
	first.Close()
	again, err := lockNode(dir, "n1")
	if err != nil {
		t.Fatalf("lock after the holder closed: %v", err)
	}
	again.Close()
}

// TestLiveCRISocketIsKept: a live server on the node's CRI socket (left by
// a process that escaped the lock, or anything else) is refused, not
// deleted; the server keeps working.
func TestLiveCRISocketIsKept(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "cri.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, err = Start(context.Background(), Config{NodeName: "n1", Dir: dir, BootstrapKubeconfig: bootstrapKubeconfig(t)})
	if err == nil || !strings.Contains(err.Error(), "in use by a live server") {
		t.Fatalf("Start = %v, want the live socket refused", err)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("the live socket was taken away: %v", err)
	}
	c.Close()
	// The failed start released the node's lock.
	lock, err := lockNode(dir, "n1")
	if err != nil {
		t.Fatalf("lock after a failed start: %v", err)
	}
	lock.Close()
}

func longDir(t *testing.T) string {
	d := filepath.Join(t.TempDir(), strings.Repeat("deep-folder-", 6), "nodes", "n1")
	if len(d) <= maxSocketBase {
		t.Fatalf("%s is not long enough", d)
	}
	return d
}

// TestShortLinkIsPrivate: the short link to a deep node folder lives in a
// 0700 folder of ours, is reused, and a wrong link there is replaced.
func TestShortLinkIsPrivate(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	dir := longDir(t)
	c := &Config{Dir: dir}
	if err := c.shortenDir(); err != nil {
		t.Fatal(err)
	}
	private := filepath.Dir(c.shortDir)
	fi, err := os.Lstat(private)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("link folder %s: %v %v, want a 0700 folder", private, fi, err)
	}
	if target, err := os.Readlink(c.shortDir); err != nil || target != dir {
		t.Fatalf("link %s -> %q (%v), want %s", c.shortDir, target, err, dir)
	}
	if !strings.HasPrefix(c.MockCRISocket(), c.shortDir+"/") || !strings.HasPrefix(c.RootDir(), c.shortDir+"/") {
		t.Errorf("socket %s and kubelet root %s do not go through the short link", c.MockCRISocket(), c.RootDir())
	}
	// A stale link (another target) is replaced, not followed.
	os.Remove(c.shortDir)
	if err := os.Symlink(t.TempDir(), c.shortDir); err != nil {
		t.Fatal(err)
	}
	c2 := &Config{Dir: dir}
	if err := c2.shortenDir(); err != nil {
		t.Fatal(err)
	}
	if target, _ := os.Readlink(c2.shortDir); c2.shortDir != c.shortDir || target != dir {
		t.Errorf("second run: link %s -> %s", c2.shortDir, target)
	}
	// The link of a node folder that is gone is swept by the next node.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := (&Config{Dir: longDir(t)}).shortenDir(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(c.shortDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dangling link %s is still there (%v)", c.shortDir, err)
	}
}

// TestShortLinkRefusesAnUnsafeFolder: if the link folder is open to others
// or is a symlink someone planted, the node refuses to start.
func TestShortLinkRefusesAnUnsafeFolder(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	private := filepath.Join(tmp, "kubelet-labs-"+strconv.Itoa(os.Getuid()))

	if err := os.Mkdir(private, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(private, 0o777) // past the umask
	err := (&Config{Dir: longDir(t)}).shortenDir()
	if err == nil || !strings.Contains(err.Error(), "want 0700") {
		t.Errorf("world-writable link folder: %v, want it refused", err)
	}

	os.Remove(private)
	if err := os.Symlink(t.TempDir(), private); err != nil {
		t.Fatal(err)
	}
	err = (&Config{Dir: longDir(t)}).shortenDir()
	if err == nil || !strings.Contains(err.Error(), "not a folder") {
		t.Errorf("planted symlink as link folder: %v, want it refused", err)
	}

	if os.Getuid() != 0 {
		t.Log("not root: the other-owner case needs chown and is not checked here")
		return
	}
	os.Remove(private)
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(private, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	err = (&Config{Dir: longDir(t)}).shortenDir()
	if err == nil || !strings.Contains(err.Error(), "another user") {
		t.Errorf("link folder owned by uid 4242: %v, want it refused", err)
	}
}

// TestServerListensOnTheNodeIPByDefault: with no address given, the kubelet
// server listens on the node's InternalIP alone — the address it publishes,
// where the apiserver dials it — not on all addresses; what is given is kept.
func TestServerListensOnTheNodeIPByDefault(t *testing.T) {
	c := Config{NodeName: "n1", Dir: t.TempDir(), BootstrapKubeconfig: "bootstrap.kubeconfig"}
	if err := c.setDefaults(); err != nil {
		t.Fatal(err)
	}
	ip := net.ParseIP(c.Address)
	if ip == nil || ip.IsUnspecified() {
		t.Fatalf("default address %q: the kubelet server listens on all addresses; want the node's InternalIP only", c.Address)
	}
	if !ip.IsLoopback() && c.NodeIP != c.Address {
		t.Errorf("default address %q but node IP %q: the apiserver dials the node IP, so the server must listen there", c.Address, c.NodeIP)
	}
	if ip.IsLoopback() && c.NodeIP != "" {
		t.Errorf("no default route, loopback server, yet node IP %q", c.NodeIP)
	}
	for _, tc := range []struct{ address, nodeIP, listen, publish string }{
		{"", "192.0.2.7", "192.0.2.7", "192.0.2.7"},
		{"192.0.2.7", "", "192.0.2.7", "192.0.2.7"},
		{"0.0.0.0", "", "0.0.0.0", ""},
		{"127.0.0.1", "", "127.0.0.1", ""},
		{"0.0.0.0", "192.0.2.7", "0.0.0.0", "192.0.2.7"},
	} {
		if l, p := ListenAddress(tc.address, tc.nodeIP); l != tc.listen || p != tc.publish {
			t.Errorf("ListenAddress(%q, %q) = %q, %q; want %q, %q", tc.address, tc.nodeIP, l, p, tc.listen, tc.publish)
		}
	}
}

// TestClusterDNSReachesTheKubelet: --cluster-dns and --cluster-domain end
// up in the KubeletConfiguration the real kubelet runs with (its
// clusterDNS and clusterDomain); unset, they stay the kubelet's defaults:
// none and "".
func TestClusterDNSReachesTheKubelet(t *testing.T) {
	for _, tc := range []struct {
		dns    []string
		domain string
	}{
		{[]string{"10.0.0.10", "fd00::a"}, "cluster.local"},
		{nil, ""},
	} {
		c := Config{NodeName: "n1", Dir: t.TempDir(), BootstrapKubeconfig: "bootstrap.kubeconfig", Address: "192.0.2.7",
			ClusterDNS: tc.dns, ClusterDomain: tc.domain}
		if err := c.setDefaults(); err != nil {
			t.Fatal(err)
		}
		s, err := kubeletServer(&c, "unix:///run/cri.sock")
		if err != nil {
			t.Fatal(err)
		}
		kc := s.KubeletConfiguration
		if strings.Join(kc.ClusterDNS, ",") != strings.Join(tc.dns, ",") || kc.ClusterDomain != tc.domain {
			t.Errorf("Config ClusterDNS %q ClusterDomain %q: the kubelet got clusterDNS %q clusterDomain %q", tc.dns, tc.domain, kc.ClusterDNS, kc.ClusterDomain)
		}
	}
}

// TestBadClusterDNSIsRefused: a cluster DNS that is not an IP (which the
// kubelet would only log and drop) or a domain that is not one fails
// Start in one line, before the node's folder is made.
func TestBadClusterDNSIsRefused(t *testing.T) {
	for _, tc := range []struct {
		dns    []string
		domain string
		want   string
	}{
		{[]string{"10.0.0.10", "ten"}, "", `cluster DNS "ten" is not an IP address: want IPs such as 10.0.0.10`},
		{[]string{""}, "", `cluster DNS "" is not an IP address`},
		{nil, "Cluster_Local", `cluster domain "Cluster_Local" is not a DNS domain`},
	} {
		dir := filepath.Join(t.TempDir(), "node")
		_, err := Start(context.Background(), Config{NodeName: "n1", Dir: dir, BootstrapKubeconfig: bootstrapKubeconfig(t),
			ClusterDNS: tc.dns, ClusterDomain: tc.domain})
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ClusterDNS %q ClusterDomain %q: Start = %v, want one line that starts %q", tc.dns, tc.domain, err, tc.want)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("ClusterDNS %q ClusterDomain %q: the refused start made the node's folder", tc.dns, tc.domain)
		}
	}
}

// TestHostPathOnARealRuntimeOnly: on a real runtime the node mounts
// hostPath volumes (kube-proxy's /run/xtables.lock: without it a full
// cluster's kube-proxy never starts); on the mock CRI, where a pod must
// not touch the host, it does not.
func TestHostPathOnARealRuntimeOnly(t *testing.T) {
	has := func(real bool) bool {
		for _, p := range volumePlugins(real) {
			if p.GetPluginName() == "kubernetes.io/host-path" {
				return true
			}
		}
		return false
	}
	if !has(true) {
		t.Error("with --cri-endpoint (a real runtime) the node has no hostPath plugin: kube-proxy's pod would stay FailedMount")
	}
	if has(false) {
		t.Error("on the mock CRI the node has a hostPath plugin: a pod could create files on the host")
	}
}
