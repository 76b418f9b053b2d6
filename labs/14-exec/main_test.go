package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/internal/critest"
	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/labs/14-exec/visitor"
	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/mykubelet"
	"kubelet-labs/mycore/server"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func defaults(kubeconfig, nodeName, runtime string) options {
	return options{kubeconfig: kubeconfig, nodeName: nodeName, runtime: labruntime.Flags{Kind: runtime}, port: 0,
		websockets: true, denyTTL: time.Second, timeout: time.Minute}
}

// startLab runs the lab in-process with a private state folder.
func startLab(t *testing.T, o options) *testenv.Lab[*lab] {
	t.Helper()
	testenv.ControlPlane(t)
	t.Setenv(state.EnvVar, t.TempDir())
	return testenv.StartLab(t, func(ctx context.Context, out io.Writer, onReady func(*lab)) error {
		return run(ctx, o, labenv.NewPrinter(out), onReady)
	})
}

// TestKubectlIntoOurNode is the README's walk-through, on the mock and on
// containerd: the pod of shell.yaml, then kubectl exec, logs -f and
// port-forward through the real apiserver into our server, then the
// refusals at the node server's door.
func TestKubectlIntoOurNode(t *testing.T) {
	for _, rc := range critest.Cases() {
		t.Run(rc.Name, func(t *testing.T) {
			runtime, endpoint, node := "mock", "", "t14-mock"
			if rc.Name != "fakecri" { // containerd, or one of its flavours (containerd-2.2, ...)
				// Skips, or fails in CI, without containerd; found before
				// the test's state folder replaces the course's.
				rt := rc.Setup(t)
				endpoint = rt.Endpoint
				runtime = "containerd"
				node = "t14-" + strings.ReplaceAll(rc.Name, ".", "")
				t.Cleanup(func() { removeStopped(t, critest.Dial(t, rt), node) })
			}
			walkThrough(t, node, runtime, endpoint)
		})
	}
}

func walkThrough(t *testing.T, nodeName, runtime, endpoint string) {
	cp := testenv.ControlPlane(t)
	admin := testenv.AdminClient(t)
	before := goleak.IgnoreCurrent()
	o := defaults(cp.AdminKubeconfig(), nodeName, runtime)
	o.runtime.Endpoint = endpoint
	l := startLab(t, o)
	pod := shellPod(t, admin, nodeName, "")
	waitReady(t, admin, pod)
	// No --address: the node found it, on the route to lab 00's apiserver
	// (which advertises none: the kubeconfig's server is where it is).
	if want := "address   127.0.0.1, this machine's address on the route to the apiserver at " + strings.TrimPrefix(cp.URL(), "https://") +
		" (the kubeconfig's server; EndpointSlice default/kubernetes lists no address)"; !strings.Contains(l.Out.String(), want) {
		t.Errorf("the lab did not say where the node's address comes from: want the line\n  %s", want)
	}

	t.Run("exec", func(t *testing.T) {
		if got, errOut, code := testenv.Kubectl(t, "", "exec", pod.Name, "--", "echo", "hi"); got != "hi\n" || code != 0 {
			t.Errorf("kubectl exec shell -- echo hi: %q, exit %d, %q", got, code, errOut)
		}
		if _, errOut, code := testenv.Kubectl(t, "", "exec", pod.Name, "--", "sh", "-c", "exit 3"); code != 3 {
			t.Errorf("kubectl exec shell -- sh -c 'exit 3': exit %d (%q), want 3", code, errOut)
		}
		if got, errOut, code := testenv.Kubectl(t, "hello\n", "exec", "-i", pod.Name, "--", "cat"); got != "hello\n" || code != 0 {
			t.Errorf("echo hello | kubectl exec -i shell -- cat: %q, exit %d, %q", got, code, errOut)
		}
		if !strings.Contains(l.Out.String(), "server  GET /exec/default/shell/shell?command=echo&command=hi&error=1&output=1 [upgrade websocket: v5.channel.k8s.io] user=kube-apiserver-kubelet-client create nodes/proxy: allowed → upgraded: streaming") {
			t.Errorf("the lab did not print the exec request as it reached the node server")
		}
	})
	t.Run("logs -f", func(t *testing.T) {
		cmd := testenv.KubectlCmd(t, "logs", "-f", pod.Name)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		lines := readLines(t, stdout, 3, 30*time.Second)
		if lines[0] != "started" || lines[1] != "tick" || lines[2] != "tick" {
			t.Errorf("kubectl logs -f shell: %q, want started, tick, tick", lines)
		}
	})
	t.Run("port-forward", func(t *testing.T) {
		body := testenv.PortForwardGet(t, "", "pod/"+pod.Name, "8080", "/hostname")
		want := "hello from the mock CRI: port 8080 of sandbox"
		if runtime == "containerd" {
			want = "shell\n" // /etc/hostname, served by the pod's busybox httpd
		}
		if !strings.Contains(body, want) {
			t.Errorf("curl localhost:PORT/hostname through kubectl port-forward: %q, want %q", body, want)
		}
	})
	t.Run("at the node server's door", func(t *testing.T) {
		refusals(t, l.L, admin)
	})

	// A graceful delete: the node stops the containers, then the status
	// manager removes the object. Only then does the lab end, so nothing is
	// left in a shared containerd, and nothing of it keeps running here.
	ctx := context.Background()
	if err := admin.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.PollTrue(t, "pod "+pod.Name+" gone after its delete (the node finishes it)", time.Minute, func() bool {
		_, err := admin.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	l.Stop()
	goleak.VerifyNone(t, before,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"))
}

// removeStopped removes what the node left in a shared containerd: the
// deleted pod's sandbox, which its node stopped but whose garbage
// collection (a minute later) the lab's end came before. Every one must be
// stopped already: a running one means the node did not finish the pod.
func removeStopped(t *testing.T, crc *cri.Client, node string) {
	ctx := context.Background()
	pods, err := crc.Pods(ctx, map[string]string{mykubelet.NodeLabel: node})
	if err != nil {
		t.Errorf("list the sandboxes of %s: %v", node, err)
		return
	}
	for _, p := range pods {
		if p.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			t.Errorf("sandbox %.13s of %s/%s still ready after the pod was deleted", p.Id, p.Metadata.Namespace, p.Metadata.Name)
		}
		if err := crc.RemovePod(ctx, p.Id, time.Second); err != nil {
			t.Errorf("remove sandbox %.13s: %v", p.Id, err)
		}
	}
}

// refusals knocks on the node server with the files the lab printed, as
// the README's curl commands do.
func refusals(t *testing.T, l *lab, admin kubernetes.Interface) {
	port := l.node.Server.Port()
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	ca, err := os.ReadFile(l.node.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := get(ca, nil, base+"/pods"); err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Errorf("no client certificate: %v, want the handshake refused (certificate required)", err)
	}
	cert, err := tls.LoadX509KeyPair(l.visitor.Cert, l.visitor.Key)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(l.visitor.Key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v %v, want mode 0600", l.visitor.Key, fi.Mode(), err)
	}
	code, body, err := get(ca, &cert, base+"/pods")
	if want := "Forbidden (user=lab-14-visitor, verb=get, resource=nodes, subresource(s)=[pods proxy])"; err != nil || code != 403 || strings.TrimSpace(body) != want {
		t.Errorf("the visitor, before any RBAC: %d %q (%v), want 403 %q", code, body, err, want)
	}

	// The README's grant; the denial is cached for the unauthorized TTL.
	ctx := context.Background()
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "lab-14-visitor"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: visitor.User}}}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
	})
	testenv.PollTrue(t, "the visitor let in after the grant", 30*time.Second, func() bool {
		code, body, err = get(ca, &cert, base+"/pods")
		return err == nil && code == 200
	})
	if !strings.Contains(body, `"name":"shell"`) {
		t.Errorf("the visitor after the grant: %d %.200q", code, body)
	}
	for _, c := range []struct{ path, want string }{
		{"/containerLogs/default/nosuch/shell", "pod default/nosuch is not on node " + l.node.Name},
		{"/containerLogs/default/shell/nosuch", `container "nosuch" is not in pod default/shell (its containers: shell, web)`},
	} {
		code, body, err := get(ca, &cert, base+c.path)
		if err != nil || code != 404 || strings.TrimSpace(body) != c.want {
			t.Errorf("GET %s: %d %q (%v), want 404 %q", c.path, code, body, err, c.want)
		}
	}
}

// TestBadInputIsAClearError: one line, before anything is registered.
func TestBadInputIsAClearError(t *testing.T) {
	cp := testenv.ControlPlane(t)
	taken, err := server.Listen("127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	for _, c := range []struct {
		change func(*options)
		want   string
	}{
		{func(o *options) { o.port = port }, fmt.Sprintf("127.0.0.1:%d is already in use", port)},
		{func(o *options) { o.runtime.Kind = "docker" }, `--runtime "docker": want one of containerd, containerd-2.2, containerd-1.6, mock`},
		{func(o *options) { o.address, o.nodeIP = "127.0.0.1", "10.1.2.3" }, "--node-ip 10.1.2.3 but --address 127.0.0.1"},
		// --node-ip alone: the server listens there, so it must be ours
		{func(o *options) { o.nodeIP = "198.51.100.123" }, "node server: 198.51.100.123 is not an address of this machine"},
		{func(o *options) { o.address = "localhost" }, `--address "localhost" is not an IP address`},
		{func(o *options) { o.nodeName = "Bad_Name" }, "Bad_Name"},
	} {
		t.Setenv(state.EnvVar, t.TempDir())
		o := defaults(cp.AdminKubeconfig(), "t14-bad", "mock")
		c.change(&o)
		err := run(context.Background(), o, labenv.NewPrinter(io.Discard), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("run with bad input: %v, want an error with %q", err, c.want)
		}
	}
	if _, err := testenv.AdminClient(t).CoreV1().Nodes().Get(context.Background(), "t14-bad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("bad input still registered node t14-bad (%v)", err)
	}
}

// shellPod creates shell.yaml's pod, bound to nodeName, named name ("" keeps
// shell).
func shellPod(t *testing.T, admin kubernetes.Interface, nodeName, name string) *v1.Pod {
	t.Helper()
	data, err := os.ReadFile("shell.yaml")
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	pod := obj.(*v1.Pod)
	pod.Spec.NodeName = nodeName
	if name != "" {
		pod.Name = name
	}
	testenv.Poll(t, "pod "+pod.Name+" created", time.Minute, func() (bool, error) {
		_, err := admin.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "serviceaccount") {
			return false, nil // the default ServiceAccount comes a moment after the namespace
		}
		return err == nil, err
	})
	t.Cleanup(func() {
		zero := int64(0)
		_ = admin.CoreV1().Pods(pod.Namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	return pod
}

func waitReady(t *testing.T, admin kubernetes.Interface, pod *v1.Pod) {
	t.Helper()
	testenv.PollTrue(t, "pod "+pod.Name+" Ready", 2*time.Minute, func() bool {
		p, err := admin.CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
				return true
			}
		}
		return false
	})
}

// get is the README's curl: the cluster CA to trust the node, and an
// optional client certificate.
func get(ca []byte, cert *tls.Certificate, url string) (int, string, error) {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	cfg := &tls.Config{RootCAs: roots}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	tr := &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// readLines reads n lines from r within timeout.
func readLines(t *testing.T, r io.Reader, n int, timeout time.Duration) []string {
	t.Helper()
	got := make(chan []string, 1)
	go func() {
		var lines []string
		sc := bufio.NewScanner(r)
		for len(lines) < n && sc.Scan() {
			lines = append(lines, sc.Text())
		}
		got <- lines
		_, _ = io.Copy(io.Discard, r)
	}()
	select {
	case lines := <-got:
		if len(lines) < n {
			t.Fatalf("only %d lines: %q", len(lines), lines)
		}
		return lines
	case <-time.After(timeout):
		t.Fatalf("no %d lines within %s", n, timeout)
	}
	return nil
}
