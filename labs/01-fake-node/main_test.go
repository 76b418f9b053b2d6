package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"kubelet-labs/internal/controlplane"
	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/labs/01-fake-node/nodewatch"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// fakeNode starts the lab as a learner would (the built program) against
// the test control plane, with a private state folder.
func fakeNode(t *testing.T, name string, extra ...string) (*testenv.Program, string) {
	p, stateDir := fakeNodeWith(t, name, nil, extra...)
	return p, filepath.Join(stateDir, "nodes", name)
}

// fakeNodeWith is fakeNode with extra environment (KUBECONFIG defaults to
// the admin's); it returns the state folder.
func fakeNodeWith(t *testing.T, name string, env []string, extra ...string) (*testenv.Program, string) {
	t.Helper()
	cp := testenv.ControlPlane(t)
	bin := testenv.BuildLab(t, "./labs/01-fake-node")
	stateDir := t.TempDir()
	args := append([]string{"--node-name=" + name, "--lease-duration=20s"}, extra...)
	env = append([]string{"LABS_STATE_DIR=" + stateDir, "KUBECONFIG=" + cp.AdminKubeconfig()}, env...)
	p := testenv.StartProgram(t, bin, env, args...)
	t.Cleanup(func() {
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(stateDir, "nodes", name, "kubelet.log"))
			t.Logf("end of the kubelet log:\n%s", tail(string(log), 40))
		}
	})
	p.WaitFor(t, "Node "+name+" is Ready", 3*time.Minute)
	return p, stateDir
}

func TestFakeNodeRegistersReadyRenewsLeaseAndRunsAPod(t *testing.T) {
	const name = "fake-node-test"
	p, nodeDir := fakeNode(t, name)
	admin := testenv.AdminClient(t)
	ctx := context.Background()

	node, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !nodeReady(node) {
		t.Fatalf("node conditions %v", node.Status.Conditions)
	}
	if v := node.Status.NodeInfo.KubeletVersion; v != controlplane.KubernetesVersion {
		t.Errorf("kubelet version %q, want %s", v, controlplane.KubernetesVersion)
	}
	if !strings.HasPrefix(node.Status.NodeInfo.ContainerRuntimeVersion, "fakecri://") {
		t.Errorf("runtime %q, want our mock CRI", node.Status.NodeInfo.ContainerRuntimeVersion)
	}

	// The node's own identity, from the certificate the TLS bootstrap got.
	nodeCfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(nodeDir, "kubelet.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	nodeClient := kubernetes.NewForConfigOrDie(nodeCfg)
	review, err := nodeClient.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := review.Status.UserInfo.Username; u != "system:node:"+name {
		t.Errorf("the node authenticates as %q, want system:node:%s", u, name)
	}
	if info, err := os.Stat(filepath.Join(nodeDir, "pki", "kubelet-client-current.pem")); err != nil || info.Mode().Perm()&0o077 != 0 {
		t.Errorf("client key/cert file: %v %v", info, err)
	}

	// The Lease is renewed: every 5 s with --lease-duration=20s.
	var lease *coordinationv1.Lease
	testenv.PollTrue(t, "the node's Lease", 30*time.Second, func() bool {
		lease, err = admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, name, metav1.GetOptions{})
		return err == nil
	})
	first := lease.Spec.RenewTime.Time
	testenv.PollTrue(t, "the Lease renewed after "+first.Format("15:04:05.000"), 30*time.Second, func() bool {
		l, err := admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, name, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.After(first)
	})
	if *lease.Spec.HolderIdentity != name || *lease.Spec.LeaseDurationSeconds != 20 {
		t.Errorf("lease holder %q duration %d", *lease.Spec.HolderIdentity, *lease.Spec.LeaseDurationSeconds)
	}

	// yaml/nginx.yaml, bound to this node: Running, then deleted.
	pod := loadNginx(t)
	pod.Spec.NodeName = name
	if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.PollTrue(t, "pod nginx Running", 2*time.Minute, func() bool {
		p, err := admin.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning
	})

	// kubectl logs and exec: apiserver → the kubelet at the node's
	// InternalIP (where it listens by default, and nowhere else) → the mock CRI.
	// The kubelet's serving certificate must be issued first.
	p.WaitFor(t, "approved serving CSR", time.Minute)
	var logs string
	testenv.PollTrue(t, "kubectl logs nginx to answer", 30*time.Second, func() bool {
		var code int
		logs, _, code = testenv.Kubectl(t, "", "logs", pod.Name)
		return code == 0 && logs != ""
	})
	if want := "hello from nginx on " + name + "\n"; logs != want {
		t.Errorf("kubectl logs nginx = %q, want %q", logs, want)
	}
	if out, errOut, code := testenv.Kubectl(t, "", "exec", pod.Name, "--", "echo", "hi"); code != 0 || out != "hi\n" {
		t.Errorf("kubectl exec nginx -- echo hi = %q, exit %d (%s), want \"hi\\n\"", out, code, errOut)
	}
	checkServerSecurity(t, node)
	checkListensOnTheNodeIPOnly(t, p.Output(), node)
	if out, errOut, code := testenv.Kubectl(t, "", "describe", "node", name); code != 0 {
		t.Errorf("kubectl describe node %s: exit %d: %s", name, code, errOut)
	} else {
		flat := strings.Join(strings.Fields(out), " ")
		for _, want := range []string{"Container Runtime Version: fakecri://", "Kubelet Version: v1.36.3", "default nginx", "Ready True"} {
			if !strings.Contains(flat, want) {
				t.Errorf("kubectl describe node lacks %q:\n%s", want, out)
			}
		}
	}

	if err := admin.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.PollTrue(t, "the node to delete pod nginx", 60*time.Second, func() bool {
		_, err := admin.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// TestPodStartupLatency measures pod create → Running on one fake node
// over 50 pods, one at a time and then all at once (reported, not
// asserted: timing is not a pass/fail here). Running is observed through a
// watch, so the numbers are not limited by polling or client throttling.
func TestPodStartupLatency(t *testing.T) {
	const name, pods = "fake-node-latency", 50
	p, _ := fakeNode(t, name)
	cfg := testenv.AdminConfig(t)
	cfg.QPS, cfg.Burst = 200, 400
	admin := kubernetes.NewForConfigOrDie(cfg)
	for _, mode := range []string{"one at a time", "all at once"} {
		lat := measureStartup(t, admin, name, pods, mode == "one at a time")
		t.Logf("pod create -> Running, %d pods %s: p50 %s, p99 %s, max %s", len(lat), mode,
			lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)*99/100].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
	}
	t.Logf("fake node RSS after %d pods: %s", 2*pods, rss(p.Cmd.Process.Pid))
}

func measureStartup(t *testing.T, admin kubernetes.Interface, node string, pods int, sequential bool) []time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "latency-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	w, err := admin.CoreV1().Pods(ns.Name).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	created := map[string]time.Time{}
	running := map[string]time.Duration{}
	// waitRunning consumes watch events until want pods are Running.
	waitRunning := func(want int) {
		for len(running) < want {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatalf("watch closed with %d/%d pods Running", len(running), want)
				}
				if pod, ok := ev.Object.(*corev1.Pod); ok && pod.Status.Phase == corev1.PodRunning {
					if _, seen := running[pod.Name]; !seen {
						running[pod.Name] = time.Since(created[pod.Name])
					}
				}
			case <-ctx.Done():
				t.Fatalf("only %d/%d pods Running after 3m", len(running), want)
			}
		}
	}
	for i := 0; i < pods; i++ {
		pod := loadNginx(t)
		pod.Name, pod.Namespace, pod.Spec.NodeName = fmt.Sprintf("nginx-%d", i), ns.Name, node
		created[pod.Name] = time.Now()
		if _, err := admin.CoreV1().Pods(ns.Name).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if sequential {
			waitRunning(i + 1)
		}
	}
	waitRunning(pods)
	var lat []time.Duration
	for _, d := range running {
		lat = append(lat, d)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat
}

func TestNoClusterIsAClearError(t *testing.T) {
	bin := testenv.BuildLab(t, "./labs/01-fake-node")
	out, code := testenv.RunProgram(t, bin, []string{"LABS_STATE_DIR=" + t.TempDir(), "KUBECONFIG=" + filepath.Join(t.TempDir(), "missing")})
	if code == 0 || !strings.Contains(out, "bad kubeconfig") || strings.Contains(out, "panic") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
}

// TestInvalidNodeNameIsRefused: a name the apiserver would reject (or one
// that climbs out of .labs/nodes) fails at once, before anything starts.
func TestInvalidNodeNameIsRefused(t *testing.T) {
	cp := testenv.ControlPlane(t)
	bin := testenv.BuildLab(t, "./labs/01-fake-node")
	state := t.TempDir()
	for _, name := range []string{"Bad_Name", "../escape"} {
		out, code := testenv.RunProgram(t, bin, []string{"LABS_STATE_DIR=" + state, "KUBECONFIG=" + cp.AdminKubeconfig()}, "--node-name="+name)
		if code == 0 || !strings.Contains(out, "not a valid Node name") {
			t.Errorf("--node-name=%s: exit %d, output:\n%s", name, code, out)
		}
	}
	if entries, _ := os.ReadDir(state); len(entries) != 0 {
		t.Errorf("an invalid name left files in the state folder: %v", entries)
	}
}

// TestBadAddressesAreRefused: an --address that is not an IP, or a
// --node-ip the kubelet would refuse (loopback, 0.0.0.0: validateNodeIP,
// pkg/kubelet/kubelet_node_status.go:714), fails at once with one line,
// before the kubelet starts.
func TestBadAddressesAreRefused(t *testing.T) {
	cp := testenv.ControlPlane(t)
	bin := testenv.BuildLab(t, "./labs/01-fake-node")
	for _, c := range []struct{ arg, want string }{
		{"--address=localhost", `--address "localhost" is not an IP address`},
		{"--node-ip=127.0.0.1", `--node-ip "127.0.0.1" is not an address the node can publish`},
		{"--node-ip=0.0.0.0", `--node-ip "0.0.0.0" is not an address the node can publish`},
		{"--node-ip=node", `--node-ip "node" is not an address the node can publish`},
	} {
		state := t.TempDir()
		out, code := testenv.RunProgram(t, bin, []string{"LABS_STATE_DIR=" + state, "KUBECONFIG=" + cp.AdminKubeconfig()}, "--node-name=fake-node-bad-ip", c.arg)
		if code == 0 || !strings.Contains(out, c.want) || strings.Contains(out, "is starting") {
			t.Errorf("%s: exit %d, want an error %q before the kubelet starts; output:\n%s", c.arg, code, c.want, out)
		}
	}
}

// TestBootScript: shellcheck-clean, and it stamps the same version as the
// control plane build.
func TestBootScript(t *testing.T) {
	root, err := state.Root()
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(root, "boot.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), `ldflags="`+controlplane.VersionLDFlags+`"`) {
		t.Errorf("boot.sh's ldflags differ from controlplane.VersionLDFlags (%s)", controlplane.VersionLDFlags)
	}
	shellcheck, err := exec.LookPath("shellcheck")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("shellcheck is not installed (apt-get install shellcheck); CI must have it")
		}
		t.Skip("shellcheck not installed: apt-get install shellcheck")
	}
	if out, err := exec.Command(shellcheck, filepath.Join(root, "boot.sh")).CombinedOutput(); err != nil {
		t.Errorf("shellcheck boot.sh: %v\n%s", err, out)
	}
}

func loadNginx(t *testing.T) *corev1.Pod {
	root, err := state.Root()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "yaml", "nginx.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*corev1.Pod)
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func rss(pid int) string {
	data, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "VmRSS:"))
		}
	}
	return "?"
}

// checkListensOnTheNodeIPOnly: by default the kubelet server listens on
// the node's InternalIP — the address the apiserver dials for logs and
// exec — and on no other address: the lab says so, and 127.0.0.1 at the
// same port refuses the connection (a real kubelet, on 0.0.0.0, would
// answer there and on every other address of the machine).
func checkListensOnTheNodeIPOnly(t *testing.T, output string, node *corev1.Node) {
	t.Helper()
	at := nodewatch.ReachableAt(node)
	if want := "  server      https://" + at + " (the node's InternalIP only: where the apiserver dials it)\n"; !strings.Contains(output, want) {
		t.Errorf("the lab's output lacks %q: by default the kubelet server should listen on the node's InternalIP alone:\n%s", want, output)
	}
	host, port, err := net.SplitHostPort(at)
	if err != nil {
		t.Fatal(err)
	}
	// Where that address comes from: lab 00's apiserver is on loopback,
	// which the kubelet refuses as a node IP, so the default route's.
	if want := "  node IP     " + host + ", the default route's address: the route to the apiserver at " + strings.TrimPrefix(testenv.ControlPlane(t).URL(), "https://") +
		" (the kubeconfig's server; EndpointSlice default/kubernetes lists no address) stays on loopback\n"; !strings.Contains(output, want) {
		t.Errorf("the lab's output lacks %q: it should say how it chose the node's address:\n%s", want, output)
	}
	if c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", port)); err == nil {
		c.Close()
		t.Errorf("the kubelet server answers on 127.0.0.1:%s too: it listens on more than the node's InternalIP", port)
	}
}

// checkServerSecurity: the kubelet server is reachable from the network
// at the node's InternalIP, so it must refuse anyone the apiserver has
// not vouched for. At the node's
// InternalIP: no client certificate → 401 (anonymous is off); the admin's
// certificate → 200 (authenticated by the cluster CA, authorized by a
// SubjectAccessReview). The serving certificate verifies against the
// cluster CA for that IP.
func checkServerSecurity(t *testing.T, node *corev1.Node) {
	t.Helper()
	admin := testenv.AdminConfig(t)
	url := "https://" + nodewatch.ReachableAt(node) + "/pods"
	for _, c := range []struct {
		who  string
		cfg  *rest.Config
		want int
	}{
		{"anonymous", rest.AnonymousClientConfig(admin), http.StatusUnauthorized},
		{"the cluster admin", admin, http.StatusOK},
	} {
		tlsCfg, err := rest.TLSConfigFor(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}, Timeout: 10 * time.Second}
		resp, err := hc.Get(url)
		if err != nil {
			t.Errorf("%s: GET %s: %v", c.who, url, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: GET %s = %d, want %d", c.who, url, resp.StatusCode, c.want)
		}
	}
}

// TestJoinsWithABootstrapToken: the node joins as a real kubelet does, with
// lab 03's bootstrap kubeconfig (--bootstrap-kubeconfig, BOOTSTRAP_KUBECONFIG
// in boot.sh): its client CSR is requested by system:bootstrap:<token id>,
// auto-approved, and the node then runs as system:node:NAME.
func TestJoinsWithABootstrapToken(t *testing.T) {
	const name = "fake-node-token"
	cp := testenv.ControlPlane(t)
	stateDir := t.TempDir()
	lab03 := testenv.BuildLab(t, "./labs/03-bootstrap-token")
	out, code := testenv.RunProgram(t, lab03, []string{"LABS_STATE_DIR=" + stateDir, "KUBECONFIG=" + cp.AdminKubeconfig()})
	if code != 0 {
		t.Fatalf("lab 03 exit %d:\n%s", code, out)
	}
	bootstrapKubeconfig := filepath.Join(stateDir, "bootstrap", "bootstrap-kubelet.kubeconfig")
	if _, err := os.Stat(bootstrapKubeconfig); err != nil {
		t.Fatalf("lab 03 wrote no bootstrap kubeconfig: %v\n%s", err, out)
	}

	p, _ := fakeNodeWith(t, name, nil, "--bootstrap-kubeconfig="+bootstrapKubeconfig)
	if !strings.Contains(p.Output(), "bootstrap   "+bootstrapKubeconfig) {
		t.Errorf("the lab does not say which bootstrap credentials it uses:\n%s", p.Output())
	}
	admin := testenv.AdminClient(t)
	csrs, err := admin.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, csr := range csrs.Items {
		if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
			continue
		}
		if block, _ := pem.Decode(csr.Spec.Request); block != nil {
			if req, err := x509.ParseCertificateRequest(block.Bytes); err == nil && req.Subject.CommonName == "system:node:"+name {
				found = true
				if !strings.HasPrefix(csr.Spec.Username, "system:bootstrap:") {
					t.Errorf("the client CSR was requested by %q, want a bootstrap token (system:bootstrap:…)", csr.Spec.Username)
				}
			}
		}
	}
	if !found {
		t.Errorf("no client CSR for system:node:%s", name)
	}
	if _, err := os.Stat(bootstrapKubeconfig); err != nil {
		t.Errorf("the learner's bootstrap kubeconfig was removed: %v", err)
	}
}

// TestCtrlCDuringBootstrapIsACleanStop: a node whose bootstrap cannot
// finish (the token is unknown to the cluster) is stopped with Ctrl-C:
// exit 0, no "is the CSR approved?" error.
func TestCtrlCDuringBootstrapIsACleanStop(t *testing.T) {
	cp := testenv.ControlPlane(t)
	ca, err := os.ReadFile(cp.PKI().CAFile())
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: cp.URL(), CertificateAuthorityData: ca}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "abcdef.0123456789abcdef"} // never created
	kc.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "x"
	path := filepath.Join(t.TempDir(), "unknown-token.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	bin := testenv.BuildLab(t, "./labs/01-fake-node")
	stateDir := t.TempDir()
	p := testenv.StartProgram(t, bin, []string{"LABS_STATE_DIR=" + stateDir, "KUBECONFIG=" + cp.AdminKubeconfig()},
		"--node-name=fake-node-ctrl-c", "--bootstrap-kubeconfig="+path)
	p.WaitFor(t, "is starting", time.Minute)
	// Ctrl-C once the kubelet is retrying its bootstrap: with client
	// rotation on (cmd/kubelet/app/server.go:985) its certificate manager
	// posts the CSR with the token, gets a 401 and retries with backoff
	// (client-go util/certificate/certificate_manager.go:595-597).
	kubeletLog := filepath.Join(stateDir, "nodes", "fake-node-ctrl-c", "kubelet.log")
	testenv.PollTrue(t, "the kubelet's CSR to be refused (kubelet.log)", time.Minute, func() bool {
		b, _ := os.ReadFile(kubeletLog)
		return strings.Contains(string(b), "cannot create certificate signing request: Unauthorized")
	})
	p.Signal(os.Interrupt)
	if !p.WaitExit(30 * time.Second) {
		t.Fatalf("still running 30 s after Ctrl-C:\n%s", p.Output())
	}
	out := p.Output()
	if p.ExitCode() != 0 || strings.Contains(out, "error:") || !strings.Contains(out, "stopping fake-node-ctrl-c") {
		t.Errorf("Ctrl-C during bootstrap: exit %d, output:\n%s", p.ExitCode(), out)
	}
	if strings.Contains(out, " is Ready") {
		t.Errorf("the node got Ready with an unknown token; the test proves nothing:\n%s", out)
	}
}

// TestSecondNodeWithTheSameNameIsRefused: a second process for a running
// node (same name, same state folder) fails at once and leaves the first
// node's runtime alone. The first node also shows that a KUBECONFIG list
// works: the merged credentials bootstrap it and are removed afterwards.
func TestSecondNodeWithTheSameNameIsRefused(t *testing.T) {
	const name = "fake-node-twice"
	cp := testenv.ControlPlane(t)
	list := filepath.Join(t.TempDir(), "missing") + string(os.PathListSeparator) + cp.AdminKubeconfig()
	first, stateDir := fakeNodeWith(t, name, []string{"KUBECONFIG=" + list})
	nodeDir := filepath.Join(stateDir, "nodes", name)
	// The lab removes them once Ready, then prints what to try.
	first.WaitFor(t, "pods bound to "+name+" appear below", time.Minute)
	if merged, _ := filepath.Glob(filepath.Join(nodeDir, "merged-*.kubeconfig")); len(merged) != 0 {
		t.Errorf("the merged admin credentials are still in the node folder: %v", merged)
	}

	bin := testenv.BuildLab(t, "./labs/01-fake-node")
	out, code := testenv.RunProgram(t, bin, []string{"LABS_STATE_DIR=" + stateDir, "KUBECONFIG=" + cp.AdminKubeconfig()},
		"--node-name="+name)
	if code == 0 || !strings.Contains(out, "already running") || !strings.Contains(out, strconv.Itoa(first.Cmd.Process.Pid)) {
		t.Errorf("second node %s: exit %d, output:\n%s", name, code, out)
	}

	// The first node still has its runtime and keeps its Lease.
	sock := ""
	for _, line := range strings.Split(first.Output(), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "runtime" {
			sock = strings.TrimPrefix(f[1], "unix://")
		}
	}
	if c, err := net.Dial("unix", sock); err != nil {
		t.Errorf("the first node's CRI socket %q is gone: %v", sock, err)
	} else {
		c.Close()
	}
	admin := testenv.AdminClient(t)
	after := time.Now()
	testenv.PollTrue(t, "the first node to renew its Lease again", 30*time.Second, func() bool {
		l, err := admin.CoordinationV1().Leases("kube-node-lease").Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.After(after)
	})
}
