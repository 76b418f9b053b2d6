package server_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"

	"kubelet-labs/internal/critest"
	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/bootstrap"
	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/journal"
	"kubelet-labs/mycore/node"
	"kubelet-labs/mycore/server"
)

// pods is the smallest PodLookup: the pods a test put on its node.
type pods struct {
	mu sync.Mutex
	m  map[string]*v1.Pod
}

func (p *pods) GetPodByName(ns, name string) (*v1.Pod, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pod, ok := p.m[ns+"/"+name]
	return pod, ok
}

func (p *pods) GetPods() []*v1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*v1.Pod
	for _, pod := range p.m {
		out = append(out, pod)
	}
	return out
}

func (p *pods) add(pod *v1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.m[pod.Namespace+"/"+pod.Name] = pod
}

// testNode is a joined node with our server in front of a runtime.
type testNode struct {
	name   string
	rt     critest.Runtime
	cri    *cri.Client
	pods   *pods
	srv    *server.Server
	ca     []byte
	admin  kubernetes.Interface
	joined *node.Joined
	log    *testenv.SyncBuffer
	// journal keeps what the server published (its CRI calls about pods).
	journal *journal.Bus
	ns      string
	// websockets: the node declares ExtendWebSocketsToKubelet and serves them.
	websockets bool
	// stop ends the server and the heartbeats and removes the pods from
	// the runtime; safe to call twice.
	stop func()

	mu        sync.Mutex
	sandboxes []string
}

func (n *testNode) url(path string) string {
	return fmt.Sprintf("https://127.0.0.1:%d%s", n.srv.Port(), path)
}

// startNode joins a node whose server runs on loopback, on a free port,
// and stops all of it when the test ends.
func startNode(t *testing.T, name string, rt critest.Runtime, websockets bool) *testNode {
	t.Helper()
	cp := testenv.ControlPlane(t)
	t.Setenv(state.EnvVar, t.TempDir())
	cfg := testenv.AdminConfig(t)
	admin := testenv.AdminClient(t)
	ca := caPEM(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())

	ln, err := server.Listen("127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	var features []string
	if websockets {
		features = []string{server.WebSocketsFeature}
	}
	j, err := node.Join(ctx, node.JoinOptions{Admin: cfg, Dir: testenv.NodeDir(t, name), Name: name, Lab: "server-test", InternalIP: "127.0.0.1",
		DaemonPort: int32(ln.Addr().(*net.TCPAddr).Port), DeclaredFeatures: features, Timeout: time.Minute})
	if err != nil {
		cancel()
		ln.Close()
		t.Fatal(err)
	}
	sc, err := server.ServingCertificate(ctx, server.ServingCertOptions{
		NodeName: name, Client: j.Client, IPs: []net.IP{net.ParseIP("127.0.0.1")}, Dir: j.Dir, CA: ca,
		Approve: server.AdminApprover(admin, server.ApproverOptions{APIServer: cfg.Host, LoopbackByDesign: true}), Timeout: time.Minute,
	})
	if err != nil {
		cancel()
		j.Stop()
		ln.Close()
		t.Fatal(err)
	}
	crc, err := cri.Dial(ctx, rt.Endpoint, cri.WithTimeout(30*time.Second))
	if err != nil {
		cancel()
		j.Stop()
		ln.Close()
		t.Fatal(err)
	}
	n := &testNode{name: name, rt: rt, cri: crc, pods: &pods{m: map[string]*v1.Pod{}}, ca: ca, admin: admin,
		joined: j, log: &testenv.SyncBuffer{}, journal: journal.New(journal.Options{Node: name}), ns: "default", websockets: websockets}
	n.srv, err = server.New(server.Config{
		NodeName: name, Listener: ln, Certificate: sc.Certificate, ClientCA: ca, Client: j.Client,
		Pods: n.pods, Runtime: n.cri.Runtime, WebSockets: websockets,
		Log:     func(f string, a ...any) { fmt.Fprintf(n.log, f+"\n", a...) },
		Journal: n.journal,
	})
	if err != nil {
		cancel()
		crc.Close()
		j.Stop()
		ln.Close()
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- n.srv.Serve(ctx) }()
	var once sync.Once
	n.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-served; err != nil {
				t.Errorf("Serve: %v", err)
			}
			j.Stop()
			n.mu.Lock()
			defer n.mu.Unlock()
			for _, id := range n.sandboxes {
				rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
				if err := crc.RemovePod(rctx, id, 0); err != nil {
					t.Errorf("remove sandbox %s: %v", id, err)
				}
				rcancel()
			}
			_ = crc.Close()
		})
	}
	t.Cleanup(func() {
		n.stop()
		dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer dcancel()
		_ = admin.CoreV1().Nodes().Delete(dctx, name, metav1.DeleteOptions{})
		if t.Failed() {
			t.Logf("node server log:\n%s\ncontrol plane logs: %v", n.log, cp.LogFiles())
		}
	})
	return n
}

func caPEM(t *testing.T, cfg *rest.Config) []byte {
	t.Helper()
	if len(cfg.TLSClientConfig.CAData) > 0 {
		return cfg.TLSClientConfig.CAData
	}
	b, err := os.ReadFile(cfg.TLSClientConfig.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// addPod creates the pod in the apiserver, bound to the node, its sandbox
// and containers in the runtime (labelled as the kubelet labels them),
// tells the node's pod lookup, and marks the pod Running — what a kubelet
// would do, minus the kubelet.
func (n *testNode) addPod(t *testing.T, name string, containers ...v1.Container) *v1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range containers {
		containers[i].Image = n.rt.BusyboxImage
	}
	zero := int64(0)
	want := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: n.ns},
		Spec: v1.PodSpec{NodeName: n.name, Containers: containers, TerminationGracePeriodSeconds: &zero,
			AutomountServiceAccountToken: new(bool)},
	}
	var pod *v1.Pod
	// The default ServiceAccount appears a moment after the namespace.
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var err error
		pod, err = n.admin.CoreV1().Pods(n.ns).Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "serviceaccount") {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = n.admin.CoreV1().Pods(n.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})

	p := cri.Pod{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID), LogDir: t.TempDir()}
	podID, podCfg, err := n.cri.RunPod(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	n.sandboxes = append(n.sandboxes, podID)
	n.mu.Unlock()
	for _, c := range pod.Spec.Containers {
		if _, err := n.cri.StartContainer(ctx, podID, podCfg, p.ContainerConfig(cri.Container{Name: c.Name, Image: c.Image, Command: c.Command, Args: c.Args})); err != nil {
			t.Fatal(err)
		}
	}
	n.pods.add(pod)

	// kubectl port-forward insists on phase Running.
	pod.Status.Phase = v1.PodRunning
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, v1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Now()}}})
	}
	if pod, err = n.admin.CoreV1().Pods(n.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("pod %s status: %v", name, err)
	}
	return pod
}

func ctr(name string, command ...string) v1.Container {
	return v1.Container{Name: name, Command: command}
}

// tlsClient calls the node server directly with the given client
// certificate (none if cert is nil), trusting the cluster CA.
func (n *testNode) tlsClient(cert *tls.Certificate) *tlsHTTP {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(n.ca)
	cfg := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return &tlsHTTP{cfg: cfg}
}

type tlsHTTP struct{ cfg *tls.Config }

func (c *tlsHTTP) get(url string) (int, string, error) {
	tr := &http.Transport{TLSClientConfig: c.cfg}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// adminCert is the admin's client certificate (system:masters).
func adminCert(t *testing.T) *tls.Certificate {
	t.Helper()
	return certOf(t, testenv.AdminConfig(t))
}

func certOf(t *testing.T, cfg *rest.Config) *tls.Certificate {
	t.Helper()
	certPEM, keyPEM := cfg.TLSClientConfig.CertData, cfg.TLSClientConfig.KeyData
	if len(certPEM) == 0 {
		var err error
		if certPEM, err = os.ReadFile(cfg.TLSClientConfig.CertFile); err != nil {
			t.Fatal(err)
		}
		if keyPEM, err = os.ReadFile(cfg.TLSClientConfig.KeyFile); err != nil {
			t.Fatal(err)
		}
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

// get fetches path from the node server and returns status and body.
func (n *testNode) get(t *testing.T, cert *tls.Certificate, path string) (int, string, error) {
	t.Helper()
	return n.tlsClient(cert).get(n.url(path))
}

// waitLines reads r until it has seen n lines equal to want.
func waitLines(t *testing.T, r io.Reader, want string, n int, timeout time.Duration) {
	t.Helper()
	got := make(chan struct{})
	var lines []string
	var mu sync.Mutex
	go func() {
		sc := bufio.NewScanner(r)
		seen := 0
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
			if sc.Text() == want {
				if seen++; seen == n {
					close(got)
					break
				}
			}
		}
		_, _ = io.Copy(io.Discard, r)
	}()
	select {
	case <-got:
	case <-time.After(timeout):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("no %d lines %q within %s; got %q", n, want, timeout, lines)
	}
}

// openPTY opens a pseudo-terminal pair (what a terminal emulator gives a
// shell), so kubectl -t finds a terminal on its stdin.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Fatalf("unlockpt: %v", err)
	}
	num, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Fatalf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", num), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Fatalf("open pts: %v", err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s
}

// setControllingTTY starts cmd in a session of its own with its stdin as
// the controlling terminal.
func setControllingTTY(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
}

// selfSigned is a client certificate no cluster CA signed.
func selfSigned(t *testing.T) *tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "system:masters-wannabe", Organization: []string{"system:masters"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// stopNode stops the node's server (closing every session) and its heartbeats.
func stopNode(t *testing.T, n *testNode) { n.stop() }

// userWith gives a new user a client certificate from the cluster CA
// (through the CSR API, signer kubernetes.io/kube-apiserver-client) and
// the one RBAC right `verb nodes/proxy`, and waits until the apiserver
// answers a SubjectAccessReview for that right with allow, so that the
// node's first question is not answered by an RBAC cache that lags behind.
func (n *testNode) userWith(t *testing.T, name, verb string) *tls.Certificate {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/proxy"}, Verbs: []string{verb}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: name}}}
	if _, err := n.admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.admin.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	if _, err := n.admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = n.admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	testenv.Poll(t, fmt.Sprintf("RBAC to allow %s %s nodes/proxy", name, verb), 30*time.Second, func() (bool, error) {
		sar, err := n.admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: name, ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: verb, Resource: "nodes", Subresource: "proxy", Name: n.name}}}, metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed, err
	})

	keyPEM, err := keyutil.MakeEllipticPrivateKeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	der, err := certutil.MakeCSR(key, &pkix.Name{CommonName: name}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	hour := time.Hour
	csrName, uid, err := csr.RequestCertificateWithContext(ctx, n.admin, der, "", certificatesv1.KubeAPIServerClientSignerName, &hour,
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}, key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = n.admin.CertificatesV1().CertificateSigningRequests().Delete(context.Background(), csrName, metav1.DeleteOptions{})
	})
	if err := bootstrap.SetApproval(ctx, n.admin, csrName, true, "ServerTest", "a test user"); err != nil {
		t.Fatal(err)
	}
	certPEM, err := csr.WaitForCertificate(ctx, n.admin, csrName, uid)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

// upgradeGet sends what a WebSocket client sends to open a stream — an
// HTTP GET asking to upgrade to a WebSocket speaking protocol — and
// returns the status and body of the answer: 101 means the stream is open,
// so the caller got past authorization.
func (n *testNode) upgradeGet(t *testing.T, cert *tls.Certificate, path, protocol string) (int, string) {
	t.Helper()
	cfg := n.tlsClient(cert).cfg
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", fmt.Sprintf("127.0.0.1:%d", n.srv.Port()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	req, err := http.NewRequest(http.MethodGet, n.url(path), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	req.Header.Set("Sec-WebSocket-Protocol", protocol)
	if err := req.Write(c); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return resp.StatusCode, "" // a stream: no body to wait for
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// wsExec runs an exec the way kubectl does against a node that speaks
// WebSockets (client-go's WebSocket v5 executor, an HTTP GET), straight at
// the node server with the given client certificate, and returns stdout.
func (n *testNode) wsExec(t *testing.T, cert *tls.Certificate, path string) (string, error) {
	t.Helper()
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	cfg := &rest.Config{Host: n.url(""), TLSClientConfig: rest.TLSClientConfig{CAData: n.ca, CertData: certPEM, KeyData: keyPEM}}
	exec, err := remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, n.url(path))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
	if errOut.Len() > 0 {
		t.Logf("exec stderr: %q", errOut.String())
	}
	return out.String(), err
}
