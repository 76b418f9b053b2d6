package scripts

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/internal/critest"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/mycore/cri"
)

// hostPortBridge is the bridge prefix of the test's own containerd: its
// links are klhp22 and klhp16, never the course's labs22 and labs16.
const hostPortBridge = "klhp"

// A container's hostPort works on the course's containerd, as upstream's
// conformance spec "[sig-network] HostPort validates that there is no
// conflict between pods with same hostPort but different hostIP and
// protocol" (test/e2e/network/hostport.go:63, v1.36.3) needs it: two pods
// with the same hostPort, one on 127.0.0.1 and one on the host's bridge
// address, each answer on theirs — 127.0.0.1 also over a connection bound
// to the bridge's address, as the spec's `curl --interface <node IP>` binds
// to the node's. Then
// containerd-down.sh leaves no NAT rule behind: neither the chain of the pod
// still running (down kills containerd, so no CNI DEL removes it) nor
// portmap's shared CNI-HOSTPORT-* chains. It runs on a containerd of its own
// (its own root tree, bridge and subnet), started and stopped here, so the
// course's containerd keeps running untouched. Before portmap was in the
// conflist the GET to 127.0.0.1 was refused.
func TestHostPortReachesThePodAndDownRemovesItsNAT(t *testing.T) {
	requireRoot(t)
	// the flavours the rest of the tests run on (CI: both)
	flavours := critest.Flavours()
	critest.Require(t, len(flavours) > 0, "no containerd of ours runs (sudo scripts/containerd-up.sh): this test starts the same flavours in a tree of its own")
	before := hostPortChains(t, natRules(t))

	root := seedRoot(t, flavours)
	t.Setenv(labruntime.RootDirEnvVar, root)
	env := []string{"LABS_CNI_BRIDGE=" + hostPortBridge, "LABS_CNI_SUBNET=" + freeSubnet(t), "LABS_NO_INSTALL=1"}
	down := func() (string, error) { return runScript(t, env, "./containerd-down.sh", "--purge") }
	downed := false
	t.Cleanup(func() {
		if !downed {
			if out, err := down(); err != nil {
				t.Errorf("containerd-down.sh (cleanup): %v\n%s", err, out)
			}
		}
	})
	if out, err := runScript(t, env, "./containerd-up.sh", "--version", strings.Join(flavours, ",")); err != nil {
		t.Fatalf("containerd-up.sh --version %s in %s: %v\n%s", strings.Join(flavours, ","), root, err, out)
	}

	var running []string // the chains of the pods left running for down
	for _, f := range flavours {
		running = append(running, hostPortPods(t, f, &downed))
	}
	rules := natRules(t)
	for _, c := range running {
		if !strings.Contains(rules, "-N "+c+"\n") {
			t.Fatalf("no chain %s for the running pod's host port before down:\n%s", c, rules)
		}
	}

	out, err := down()
	downed = true
	if err != nil {
		t.Fatalf("containerd-down.sh: %v\n%s", err, out)
	}
	rules = natRules(t)
	for _, c := range running {
		if strings.Contains(rules, c) {
			t.Errorf("after containerd-down.sh the host port chain %s of a pod that ran is still there:\n%s", c, rules)
		}
	}
	if len(before) > 0 {
		t.Logf("portmap's shared chains %v were here before the test (another CNI user's): down leaves them", before)
	} else if left := hostPortChains(t, rules); len(left) > 0 {
		t.Errorf("after containerd-down.sh, iptables-save -t nat still has %v (none was there before):\n%s", left, rules)
	}
}

// hostPortPods runs two pods on flavour f with the same hostPort, one on
// 127.0.0.1 and one on the bridge's gateway, checks that each answers
// there, removes the first (CNI DEL) and returns the host port chain of
// the second, left running for containerd-down.sh.
func hostPortPods(t *testing.T, f string, downed *bool) string {
	t.Helper()
	rt := critest.ContainerdFlavour(t, f)
	e, err := labruntime.LoadFlavour(f)
	if err != nil {
		t.Fatal(err)
	}
	_, subnet, err := net.ParseCIDR(e.Subnet)
	if err != nil {
		t.Fatalf("CNI_SUBNET %q of %s: %v", e.Subnet, e.File, err)
	}
	gw := subnet.IP.To4()
	gw = net.IPv4(gw[0], gw[1], gw[2], 1) // host-local's gateway: isGateway puts it on the bridge
	c := critest.Dial(t, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	port := freePort(t)

	run := func(name, hostIP string) string {
		p := critest.Pod(t, name)
		cfg := p.SandboxConfig()
		// what the kubelet puts there from the containers' ports
		// (kuberuntime_sandbox.go generatePodSandboxConfig)
		cfg.PortMappings = []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 8080, HostPort: int32(port), HostIp: hostIP}}
		os.MkdirAll(cfg.LogDirectory, 0o755)
		id, err := c.Runtime.RunPodSandbox(c.Context(ctx), cfg, "")
		if err != nil {
			t.Fatalf("RunPodSandbox %s with host port %s:%d: %v", name, hostIP, port, err)
		}
		t.Cleanup(func() {
			if !*downed {
				c.RemovePod(context.Background(), id, 0)
			}
		})
		_, err = c.StartContainer(ctx, id, cfg, p.ContainerConfig(cri.Container{Name: "web", Image: rt.BusyboxImage,
			Command: []string{"sh", "-c", "echo " + name + " > /tmp/index.html && exec httpd -f -p 8080 -h /tmp"}}))
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	local := run("on-localhost", "127.0.0.1")
	onGW := run("on-gateway", gw.String())

	for _, g := range []struct {
		url  string
		from net.IP // the local address to connect from; nil: the kernel's choice
		want string
	}{
		{fmt.Sprintf("http://127.0.0.1:%d/", port), nil, "on-localhost"},
		// the spec's curl --interface <node IP> http://127.0.0.1:PORT/hostname
		{fmt.Sprintf("http://127.0.0.1:%d/", port), gw, "on-localhost"},
		{fmt.Sprintf("http://%s/", net.JoinHostPort(gw.String(), fmt.Sprint(port))), nil, "on-gateway"},
	} {
		body, err := getFrom(g.url, g.from)
		for i := 0; err != nil && i < 50; i++ { // the server may not listen yet
			time.Sleep(100 * time.Millisecond)
			body, err = getFrom(g.url, g.from)
		}
		if err != nil || strings.TrimSpace(body) != g.want {
			rules, _ := exec.Command("iptables", "-w", "-t", "nat", "-S").CombinedOutput()
			t.Fatalf("containerd %s: GET %s (from %v): %v, body %q; want the answer of the pod with that host IP, %q\niptables -t nat -S:\n%s", f, g.url, g.from, err, body, g.want, rules)
		}
	}

	// CNI DEL (StopPodSandbox) removes a pod's own chain: portmap's work
	if err := c.RemovePod(ctx, local, 0); err != nil {
		t.Fatal(err)
	}
	if chain := portmapChain(e.Bridge, local); strings.Contains(natRules(t), chain) {
		t.Errorf("the removed pod's host port chain %s is still there", chain)
	}
	return portmapChain(e.Bridge, onGW)
}

// getFrom GETs url over a connection from the local address from (nil:
// any) and returns the body.
func getFrom(url string, from net.IP) (string, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	if from != nil {
		d.LocalAddr = &net.TCPAddr{IP: from}
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("HTTP %s", resp.Status)
	}
	return string(b), err
}

// portmapChain is the chain portmap makes for sandbox id on the bridge's
// network: "CNI-DN-" and the sha512 of network name and id, 28 characters
// (containernetworking/plugins pkg/utils MustFormatChainNameWithPrefix).
func portmapChain(bridge, id string) string {
	sum := sha512.Sum512([]byte("kubelet-labs-" + bridge + id))
	return ("CNI-DN-" + hex.EncodeToString(sum[:]))[:28]
}

// natRules is `iptables -t nat -S`.
func natRules(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("iptables", "-w", "-t", "nat", "-S").Output()
	if err != nil {
		t.Fatalf("iptables -t nat -S: %v", err)
	}
	return string(out)
}

// hostPortChains are portmap's shared chains in rules.
func hostPortChains(t *testing.T, rules string) []string {
	t.Helper()
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^-N (CNI-HOSTPORT-\S+)$`).FindAllStringSubmatch(rules, -1) {
		names = append(names, m[1])
	}
	return names
}

// seedRoot makes a root tree for the test's own containerd and puts in it
// the course's containerd 2.2 and images, when the course's tree has them:
// up then builds neither (a build of containerd takes minutes). The tree is
// removed at the end (down --purge removes what it made in it).
func seedRoot(t *testing.T, flavours []string) string {
	t.Helper()
	// short: the socket path must stay under ~100 bytes
	parent, err := os.MkdirTemp("", "klhp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// never into a mount a failed down left (a container's rootfs)
		if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), " "+parent+"/") {
			t.Errorf("%s still has mounts under it: left in place", parent)
			return
		}
		os.RemoveAll(parent)
	})
	root := filepath.Join(parent, "root")
	if err := os.Mkdir(root, 0o711); err != nil {
		t.Fatal(err)
	}
	// the marker make_root_tree writes: the tree is up's, so down --purge may delete it
	os.WriteFile(filepath.Join(root, ".kubelet-labs-root"), []byte("made by containerd-up.sh of kubelet-labs (seeded by scripts/hostport_test.go)\n"), 0o644)
	course := labruntime.RootDir()
	copyDir := func(from, to string) {
		if _, err := os.Stat(from); err != nil {
			return
		}
		os.MkdirAll(filepath.Dir(to), 0o711)
		if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
			t.Fatalf("cp -a %s %s: %v\n%s", from, to, err, out)
		}
	}
	copyDir(filepath.Join(course, "images"), filepath.Join(root, "images"))
	for _, f := range flavours {
		if f == labruntime.Flavour22 {
			bins, _ := filepath.Glob(filepath.Join(course, "bin", "containerd-v*"))
			for _, b := range bins {
				copyDir(b, filepath.Join(root, "bin", filepath.Base(b)))
			}
		}
	}
	return root
}

// freeSubnet is a /16 for the test's bridges (LABS_CNI_SUBNET) that no
// route or address of this host is in.
func freeSubnet(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("ip", "-4", "-o", "addr").Output()
	if err != nil {
		t.Fatalf("ip -4 addr: %v", err)
	}
	routes, err := exec.Command("ip", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		t.Fatalf("ip -4 route: %v", err)
	}
	used := string(out) + "\n" + string(routes)
	for n := 240; n < 255; n++ {
		if !regexp.MustCompile(fmt.Sprintf(`(^|\s)10\.%d\.`, n)).MatchString(used) {
			return fmt.Sprintf("10.%d.0.0/16", n)
		}
	}
	t.Fatal("no free 10.240-254.0.0/16 for the test's bridges")
	return ""
}

// freePort is a TCP port nothing on this host listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
