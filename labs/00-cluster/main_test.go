package main

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"kubelet-labs/internal/state"

	"kubelet-labs/internal/testenv"
)

// These tests run the lab exactly as a learner does — the built program,
// its flags, Ctrl-C — with a private state folder and free ports, so they
// never touch a lab 00 the learner has running.

type lab struct {
	*testenv.Program
	stateDir string
	ports    []int
}

func TestMain(m *testing.M) { testenv.Main(m) }

// newStateDir shares the built binaries (bin/ is a symlink) but nothing else.
func newStateDir(t *testing.T) string {
	_, binDir := testenv.Binaries(t)
	dir := t.TempDir()
	// marked as the labs mark a state folder they make: the lab refuses a
	// non-empty folder without it, and this one already holds bin/
	if err := os.WriteFile(filepath.Join(dir, state.Marker), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(binDir, filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func startLab(t *testing.T, stateDir string, extraArgs ...string) *lab {
	t.Helper()
	ports := []int{freePort(t), freePort(t), freePort(t), freePort(t)}
	args := append([]string{
		"--apiserver-port=" + strconv.Itoa(ports[0]), "--etcd-port=" + strconv.Itoa(ports[1]),
		"--etcd-peer-port=" + strconv.Itoa(ports[2]), "--controller-manager-port=" + strconv.Itoa(ports[3]),
	}, extraArgs...)
	p := testenv.StartProgram(t, testenv.BuildLab(t, "./labs/00-cluster"), []string{"LABS_STATE_DIR=" + stateDir}, args...)
	return &lab{Program: p, stateDir: stateDir, ports: ports}
}

const ready = "Press Ctrl-C to stop."

// childPids reads "started NAME (pid N)" lines from the lab's output.
func (l *lab) childPids() map[string]int {
	out := map[string]int{}
	for _, m := range regexp.MustCompile(`started (\S+) \(pid (\d+)\)`).FindAllStringSubmatch(l.Output(), -1) {
		pid, _ := strconv.Atoi(m[2])
		out[m[1]] = pid
	}
	return out
}

func (l *lab) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(l.stateDir, "bin", "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(l.stateDir, "admin.kubeconfig"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func TestLabServesAndStopsCleanlyOnCtrlC(t *testing.T) {
	l := startLab(t, newStateDir(t))
	l.WaitFor(t, ready, 3*time.Minute)

	if got := l.kubectl(t, "get", "--raw", "/readyz"); strings.TrimSpace(got) != "ok" {
		t.Errorf("kubectl get --raw /readyz = %q, want ok", got)
	}
	if got := l.kubectl(t, "version"); !strings.Contains(got, "Server Version: v1.36.3") {
		t.Errorf("kubectl version:\n%s", got)
	}
	if !strings.Contains(l.Output(), "export KUBECONFIG="+filepath.Join(l.stateDir, "admin.kubeconfig")) {
		t.Errorf("the lab does not print the export line:\n%s", l.Output())
	}
	info, err := os.Stat(filepath.Join(l.stateDir, "cluster", "pki", "ca.key"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("ca.key mode: %v %v", info, err)
	}

	pids := l.childPids()
	if len(pids) != 3 {
		t.Fatalf("children %v, want 3:\n%s", pids, l.Output())
	}
	l.Signal(os.Interrupt) // Ctrl-C
	if !l.WaitExit(90 * time.Second) {
		t.Fatal("lab did not exit after Ctrl-C")
	}
	if code := l.ExitCode(); code != 0 {
		t.Errorf("exit code %d after Ctrl-C:\n%s", code, l.Output())
	}
	testenv.AssertGone(t, pids, l.ports)
}

// TestKilledLabLeavesNothingAndRestarts: kill -9 the lab; the kernel kills
// its children (Pdeathsig); the next start says it recovered and works.
func TestKilledLabLeavesNothingAndRestarts(t *testing.T) {
	stateDir := newStateDir(t)
	l := startLab(t, stateDir)
	l.WaitFor(t, ready, 3*time.Minute)
	pids := l.childPids()
	l.Signal(os.Kill)
	l.WaitExit(time.Minute)
	testenv.AssertGone(t, pids, l.ports)

	again := startLab(t, stateDir)
	again.WaitFor(t, ready, 3*time.Minute)
	if !strings.Contains(again.Output(), "did not shut down cleanly") {
		t.Errorf("restart after kill -9 did not report the stale state:\n%s", again.Output())
	}
	if got := again.kubectl(t, "get", "--raw", "/readyz"); strings.TrimSpace(got) != "ok" {
		t.Errorf("readyz after recovery = %q", got)
	}
}

func TestUnwritableStateFolderFails(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	os.WriteFile(file, nil, 0o600)
	out, code := testenv.RunProgram(t, testenv.BuildLab(t, "./labs/00-cluster"), []string{"LABS_STATE_DIR=" + filepath.Join(file, "state")})
	if code == 0 {
		t.Fatalf("want a non-zero exit:\n%s", out)
	}
	if !strings.Contains(out, "state folder") || !strings.Contains(out, "LABS_STATE_DIR") {
		t.Errorf("message does not name the state folder and the fix:\n%s", out)
	}
	if strings.Contains(out, "panic") {
		t.Errorf("panicked:\n%s", out)
	}
}

func TestPortInUseFails(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	l := startLab(t, newStateDir(t), "--apiserver-port="+strconv.Itoa(port)) // the later flag wins
	if !l.WaitExit(2 * time.Minute) {
		t.Fatal("lab did not exit although its port is taken")
	}
	out := l.Output()
	if l.ExitCode() == 0 || !strings.Contains(out, "port "+strconv.Itoa(port)+" for kube-apiserver is already in use") {
		t.Errorf("exit %d, output:\n%s", l.ExitCode(), out)
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestAPIServerAddressServesThereOnly: --apiserver-address opens the
// apiserver on that one address — what a kind cluster's pods reach when it
// is the kind bridge's. 127.0.0.2 stands in for it (every Linux machine has
// it, on lo): the lab prints it, the admin kubeconfig names it, kubectl
// verifies the serving certificate for it (so the certificate names it),
// and 127.0.0.1 no longer answers on that port.
func TestAPIServerAddressServesThereOnly(t *testing.T) {
	const addr = "127.0.0.2"
	l := startLab(t, newStateDir(t), "--apiserver-address="+addr)
	l.WaitFor(t, ready, 3*time.Minute)
	url := "https://" + addr + ":" + strconv.Itoa(l.ports[0])

	if !strings.Contains(l.Output(), "apiserver                  "+url+"\n") {
		t.Errorf("the lab does not print the apiserver as %s:\n%s", url, l.Output())
	}
	if got := strings.TrimSpace(l.kubectl(t, "config", "view", "-o", "jsonpath={.clusters[0].cluster.server}")); got != url {
		t.Errorf("the admin kubeconfig names %q, want %q", got, url)
	}
	// kubectl verifies the serving certificate against the cluster CA and
	// the address it dials: this answers only if the certificate names it
	if got := l.kubectl(t, "get", "--raw", "/readyz"); strings.TrimSpace(got) != "ok" {
		t.Errorf("kubectl get --raw /readyz on %s = %q, want ok", url, got)
	}
	crt, err := os.ReadFile(filepath.Join(l.stateDir, "cluster", "pki", "apiserver.crt"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(crt)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cert.VerifyHostname(addr) != nil {
		t.Errorf("the serving certificate names %v, not %s", cert.IPAddresses, addr)
	}
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(l.ports[0])), 5*time.Second); err == nil {
		c.Close()
		t.Errorf("127.0.0.1:%d answers too: the apiserver should listen on %s only", l.ports[0], addr)
	}

	pids := l.childPids()
	l.Signal(os.Interrupt)
	if !l.WaitExit(90 * time.Second) {
		t.Fatal("lab did not exit after Ctrl-C")
	}
	testenv.AssertGone(t, pids, l.ports)
}

// TestAPIServerAddressRefusesWhatIsNotOneLocalAddress: a name, every
// interface at once, an address of no interface — each a one-line error
// naming the flag, and nothing started.
func TestAPIServerAddressRefusesWhatIsNotOneLocalAddress(t *testing.T) {
	bin := testenv.BuildLab(t, "./labs/00-cluster")
	for addr, want := range map[string]string{
		"kind-bridge":  `--apiserver-address "kind-bridge" is not an IP address`,
		"0.0.0.0":      "--apiserver-address 0.0.0.0 would open the apiserver on every network of this machine",
		"198.51.100.7": "--apiserver-address 198.51.100.7 is not an address of this machine",
	} {
		stateDir := newStateDir(t)
		out, code := testenv.RunProgram(t, bin, []string{"LABS_STATE_DIR=" + stateDir},
			"--apiserver-address="+addr, "--apiserver-port="+strconv.Itoa(freePort(t)), "--etcd-port="+strconv.Itoa(freePort(t)),
			"--etcd-peer-port="+strconv.Itoa(freePort(t)), "--controller-manager-port="+strconv.Itoa(freePort(t)))
		if code == 0 || !strings.Contains(out, want) {
			t.Errorf("--apiserver-address=%s: exit %d, want non-zero and %q:\n%s", addr, code, want, out)
		}
		if strings.Contains(out, "started ") || strings.Contains(out, "panic") {
			t.Errorf("--apiserver-address=%s: something started or panicked:\n%s", addr, out)
		}
	}
}
