package scripts

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"kubelet-labs/internal/critest"
	"kubelet-labs/mycore/cri"
)

// dockersForwarding does to this host what starting dockerd does to it, and
// undoes it when the test ends: `iptables -P FORWARD DROP` and bridge
// netfilter on (net.bridge.bridge-nf-call-iptables=1, after
// br_netfilter is loaded), so that frames crossing any Linux bridge — ours
// too — go through iptables' FORWARD chain (moby's
// libnetwork/drivers/bridge/setup_ip_tables.go and setup_bridgenetfiltering.go
// set both).
func dockersForwarding(t *testing.T) {
	t.Helper()
	const nf = "/proc/sys/net/bridge/bridge-nf-call-iptables"
	if _, err := os.Stat(nf); err != nil {
		exec.Command("modprobe", "br_netfilter").Run()
	}
	oldNF, err := os.ReadFile(nf)
	if err != nil {
		// then bridged frames never see iptables, Docker or not
		t.Skipf("no %s (br_netfilter cannot be loaded here): bridged frames skip iptables on this host, so Docker's policy cannot touch them", nf)
	}
	out, err := exec.Command("iptables", "-w", "-S", "FORWARD").Output()
	if err != nil {
		t.Fatalf("iptables -S FORWARD: %v", err)
	}
	oldPolicy := "ACCEPT"
	if strings.Contains(string(out), "-P FORWARD DROP") {
		oldPolicy = "DROP"
	}
	t.Cleanup(func() {
		exec.Command("iptables", "-w", "-P", "FORWARD", oldPolicy).Run()
		os.WriteFile(nf, oldNF, 0o644)
	})
	if err := os.WriteFile(nf, []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("iptables", "-w", "-P", "FORWARD", "DROP").CombinedOutput(); err != nil {
		t.Fatalf("iptables -P FORWARD DROP: %v\n%s", err, out)
	}
}

// With Docker up on the same host (kind needs it; vm.yaml installs it), one
// pod still reaches another on the course's bridge: containerd-up.sh
// accepts its bridge's traffic at the top of FORWARD, whatever Docker did
// to the chain's policy. Before, a an HTTP GET from one pod to the other's IP
// timed out (upstream's intra-pod and lifecycle-hook tests failed so).
func TestPodsReachEachOtherWithDockersForwardPolicy(t *testing.T) {
	requireRoot(t)
	var ran int
	for _, tc := range critest.Cases() {
		if !strings.HasPrefix(tc.Name, "containerd") {
			continue
		}
		t.Run(tc.Name, func(t *testing.T) {
			rt := tc.Setup(t)
			c := critest.Dial(t, rt)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			start := func(name string, cmd ...string) (string, string) {
				p := critest.Pod(t, name)
				id, cfg := critest.RunPod(t, c, p)
				cid, err := c.StartContainer(ctx, id, cfg, p.ContainerConfig(cri.Container{Name: name, Image: rt.BusyboxImage, Command: cmd}))
				if err != nil {
					t.Fatal(err)
				}
				st, err := c.PodStatus(ctx, id)
				if err != nil || st.GetNetwork().GetIp() == "" {
					t.Fatalf("pod %s has no IP: %v", p.Name, err)
				}
				return cid, st.GetNetwork().GetIp()
			}
			_, serverIP := start("server", "sh", "-c", "echo hello from the other pod > /tmp/index.html && exec httpd -f -p 8080 -h /tmp")
			client, _ := start("client", "sleep", "3600")
			get := func() (cri.ExecResult, error) {
				// nc, not wget: the static busybox's wget crashes resolving even
				// an IP through glibc's NSS in a static binary
				return c.Exec(ctx, client, []string{"sh", "-c", "printf 'GET /index.html HTTP/1.0\\r\\n\\r\\n' | nc -w 5 " + serverIP + " 8080 | tail -n 1"}, 20*time.Second)
			}
			// the server up first, with the host as it is
			var res cri.ExecResult
			var err error
			for range 50 {
				if res, err = get(); err == nil && res.ExitCode == 0 {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("the client pod cannot reach the server pod %s even without Docker's policy: %v, exit %d, %s", serverIP, err, res.ExitCode, res.Stderr)
			}
			dockersForwarding(t)
			res, err = get()
			if err != nil || res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "hello from the other pod" {
				rules, _ := exec.Command("iptables", "-w", "-S", "FORWARD").CombinedOutput()
				t.Errorf("with FORWARD DROP and bridge netfilter on (as Docker leaves them), an HTTP GET from one pod to the other (%s): %v, exit %d, stdout %q, stderr %q\niptables -S FORWARD:\n%s", serverIP, err, res.ExitCode, res.Stdout, res.Stderr, rules)
			}
		})
		ran++
	}
	critest.Require(t, ran > 0, "no containerd of ours runs (sudo scripts/containerd-up.sh)")
}
