package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelet-labs/internal/critest"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/journal"
	"kubelet-labs/mycore/server"
	"kubelet-labs/mylib/fakecri"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The container commands work on the mock and on busybox alike.
var (
	ticker  = ctr("main", "sh", "-c", "echo started; while true; do echo tick; sleep 1; done")
	httpd   = ctr("web", "httpd", "-f", "-p", "7000", "-h", "/etc")
	sleeper = ctr("idle", "sh", "-c", "while true; do sleep 1; done")
)

// TestKubectlThroughOurServer runs real kubectl against the real apiserver,
// which calls our server at the node's published address, which proxies to
// the runtime's streaming server: on both runtimes, with the node speaking
// WebSockets itself (declared feature) and without (the apiserver
// translates to SPDY).
func TestKubectlThroughOurServer(t *testing.T) {
	for _, rc := range critest.Cases() {
		for _, ws := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/websockets=%v", rc.Name, ws), func(t *testing.T) {
				rt := rc.Setup(t)
				n := startNode(t, fmt.Sprintf("srv-%s-ws-%v", rc.Name, ws), rt, ws)
				pod := n.addPod(t, fmt.Sprintf("kex-%s-%v", rc.Name, ws), ticker, httpd)
				testExec(t, n, pod.Name)
				testLogs(t, n, pod.Name)
				testPortForward(t, n, pod.Name)
				testCallsOnThePodsLane(t, n, pod.Name)
			})
		}
	}
}

// testCallsOnThePodsLane: the server's CRI calls for exec, attach and
// port-forward are in the node's journal on the pod's lane (the live
// view's), each with its latency, none failed.
func testCallsOnThePodsLane(t *testing.T, n *testNode, pod string) {
	want := map[string]string{"Exec": "main", "Attach": "main", "PortForward": ""}
	for _, e := range n.journal.Backlog() {
		c, ok := want[e.Call]
		if e.Kind != journal.CRI || !ok || e.Pod != n.ns+"/"+pod || e.Container != c || e.UID == "" || e.Took <= 0 || e.Failed {
			continue
		}
		delete(want, e.Call)
	}
	if len(want) > 0 {
		t.Errorf("the journal lacks the server's CRI calls %v on the lane of %s/%s:\n%+v", want, n.ns, pod, n.journal.Backlog())
	}
}

func testExec(t *testing.T, n *testNode, pod string) {
	t.Run("exec echo", func(t *testing.T) {
		out, errOut, code := testenv.Kubectl(t, "", "exec", pod, "-c", "main", "--", "echo", "hi")
		if out != "hi\n" || code != 0 {
			t.Errorf("kubectl exec -- echo hi: stdout %q, exit %d, stderr %q; want \"hi\\n\", 0", out, code, errOut)
		}
		// What reached us: kubectl's WebSocket v5 itself when the node
		// declares the feature, else SPDY from the apiserver's translator.
		want := "POST /exec/default/" + pod + "/main?command=echo&command=hi&error=1&output=1 [upgrade SPDY/3.1: v5.channel.k8s.io,v4.channel.k8s.io"
		if n.websockets {
			want = "GET /exec/default/" + pod + "/main?command=echo&command=hi&error=1&output=1 [upgrade websocket: v5.channel.k8s.io]"
		}
		if !strings.Contains(n.log.String(), want) {
			t.Errorf("the node server's log lacks %q:\n%s", want, n.log)
		}
	})
	t.Run("exit code", func(t *testing.T) {
		_, errOut, code := testenv.Kubectl(t, "", "exec", pod, "-c", "main", "--", "sh", "-c", "exit 3")
		if code != 3 || !strings.Contains(errOut, "command terminated with exit code 3") {
			t.Errorf("kubectl exec -- sh -c 'exit 3': exit %d, stderr %q; want 3", code, errOut)
		}
	})
	t.Run("stdin", func(t *testing.T) {
		out, errOut, code := testenv.Kubectl(t, "hello through stdin\n", "exec", "-i", pod, "-c", "main", "--", "cat")
		if out != "hello through stdin\n" || code != 0 {
			t.Errorf("kubectl exec -i -- cat: stdout %q, exit %d, stderr %q", out, code, errOut)
		}
	})
	t.Run("tty", func(t *testing.T) {
		testTTY(t, pod)
	})
	t.Run("attach", func(t *testing.T) {
		cmd := testenv.KubectlCmd(t, "attach", pod, "-c", "main")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		waitLines(t, out, "tick", 1, 30*time.Second)
	})
}

// testTTY drives `kubectl exec -it -- sh` from a pseudo-terminal: the
// shell prompts, echoes what we type, and its exit code is kubectl's.
func testTTY(t *testing.T, pod string) {
	master, slave := openPTY(t)
	cmd := testenv.KubectlCmd(t, "exec", "-it", pod, "-c", "main", "--", "sh")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	setControllingTTY(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	var seen strings.Builder
	buf := make([]byte, 4096)
	read := func(want string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(seen.String(), want) {
			_ = master.SetReadDeadline(deadline)
			k, err := master.Read(buf)
			seen.Write(buf[:k])
			if err != nil {
				t.Fatalf("waiting for %q on the terminal: %v; saw %q", want, err, seen.String())
			}
		}
	}
	read("# ")
	_, _ = master.Write([]byte("echo hi-from-a-tty\r"))
	read("hi-from-a-tty\r\n")
	_, _ = master.Write([]byte("exit 4\r"))
	err := cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 4 {
		t.Errorf("kubectl exec -it -- sh, then exit 4: kubectl exited %d (%v); terminal: %q", code, err, seen.String())
	}
}

func testLogs(t *testing.T, n *testNode, pod string) {
	t.Run("logs", func(t *testing.T) {
		var out string
		testenv.PollNil(t, "two ticks in the log", 30*time.Second, func() error {
			out, _, _ = testenv.Kubectl(t, "", "logs", pod, "-c", "main")
			if !strings.HasPrefix(out, "started\ntick\ntick\n") {
				return fmt.Errorf("kubectl logs printed %q", out)
			}
			return nil
		})
		tail, _, _ := testenv.Kubectl(t, "", "logs", pod, "-c", "main", "--tail=1")
		if tail != "tick\n" {
			t.Errorf("kubectl logs --tail=1 = %q, want \"tick\\n\"", tail)
		}
		ts, _, _ := testenv.Kubectl(t, "", "logs", pod, "-c", "main", "--tail=1", "--timestamps")
		if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z tick\n$`).MatchString(ts) {
			t.Errorf("kubectl logs --timestamps = %q, want an RFC3339 time then tick", ts)
		}
		_, errOut, code := testenv.Kubectl(t, "", "logs", pod, "-c", "main", "--previous")
		if code == 0 || !strings.Contains(errOut, `previous terminated container "main"`) {
			t.Errorf("kubectl logs --previous with no earlier container: exit %d, %q", code, errOut)
		}
	})
	t.Run("logs -f", func(t *testing.T) {
		cmd := testenv.KubectlCmd(t, "logs", "-f", "--tail=0", pod, "-c", "main")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		// New lines arrive while we wait: the log is followed, not dumped.
		waitLines(t, out, "tick", 2, 30*time.Second)
	})
}

func testPortForward(t *testing.T, n *testNode, pod string) {
	t.Run("port-forward", func(t *testing.T) {
		cmd := testenv.KubectlCmd(t, "port-forward", "pod/"+pod, ":7000")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		sc := bufio.NewScanner(out)
		local := ""
		for local == "" && sc.Scan() {
			if m := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> 7000`).FindStringSubmatch(sc.Text()); m != nil {
				local = m[1]
			}
		}
		if local == "" {
			t.Fatalf("kubectl port-forward printed no local port")
		}
		go func() { _, _ = io.Copy(io.Discard, out) }()
		request := "GET /hostname HTTP/1.0\r\n\r\n"
		var got string
		defer func() {
			if t.Failed() {
				t.Logf("last answer through the forwarded port: %q", got)
			}
		}()
		testenv.PollTrue(t, "an answer through the forwarded port", 30*time.Second, func() bool {
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+local, 5*time.Second)
			if err != nil {
				return false
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.WriteString(c, request); err != nil {
				return false
			}
			if !n.rt.Real {
				// The mock's port-forward echoes what it gets, and keeps
				// the connection open.
				b := make([]byte, len(request))
				k, _ := io.ReadFull(c, b)
				got = string(b[:k])
				return got == request
			}
			b, _ := io.ReadAll(c) // httpd answers and closes
			got = string(b)
			return strings.HasPrefix(got, "HTTP/1.1 200 OK") && strings.HasSuffix(got, "\r\n\r\n"+pod+"\n")
		})
		t.Logf("through the forwarded port: %q", got)
	})
}

// TestRefusals: who may not get in, and what a wrong name gets.
func TestRefusals(t *testing.T) {
	rt := critest.FakeCRI(t)
	n := startNode(t, "srv-refusals", rt, true)
	pod := n.addPod(t, "refusals", sleeper)
	admin := adminCert(t)

	t.Run("no client certificate", func(t *testing.T) {
		_, _, err := n.get(t, nil, "/pods")
		if err == nil {
			t.Fatal("a client without a certificate got an answer")
		}
		testenv.PollTrue(t, "the handshake refusal in the server log", 10*time.Second, func() bool {
			return strings.Contains(n.log.String(), "client didn't provide a certificate")
		})
	})
	t.Run("certificate from another CA", func(t *testing.T) {
		_, _, err := n.get(t, selfSigned(t), "/pods")
		if err == nil {
			t.Fatal("a client with a self-signed certificate got an answer")
		}
	})
	t.Run("node identity lacks nodes/proxy", func(t *testing.T) {
		code, body, err := n.get(t, certOf(t, n.joined.Config), "/exec/default/"+pod.Name+"/idle?command=true&output=1")
		// exec needs create, even on a GET (auth_attributes.go nodeRequestAttributes).
		want := fmt.Sprintf("Forbidden (user=system:node:%s, verb=create, resource=nodes, subresource(s)=[proxy])", n.name)
		if err != nil || code != http.StatusForbidden || !strings.Contains(body, want) {
			t.Errorf("as the node: %d %q (%v); want 403 %q", code, body, err, want)
		}
		code, body, _ = n.get(t, certOf(t, n.joined.Config), "/pods")
		if want := "subresource(s)=[pods proxy]"; code != http.StatusForbidden || !strings.Contains(body, want) {
			t.Errorf("GET /pods as the node: %d %q; want 403 with %q", code, body, want)
		}
	})
	t.Run("admin", func(t *testing.T) {
		code, body, err := n.get(t, admin, "/pods")
		if err != nil || code != 200 || !strings.Contains(body, `"name":"refusals"`) || !strings.Contains(body, `"kind":"PodList"`) {
			t.Errorf("GET /pods as admin: %d %.200q (%v)", code, body, err)
		}
		code, body, err = n.get(t, admin, "/healthz")
		if err != nil || code != 200 || body != "ok" {
			t.Errorf("GET /healthz: %d %q (%v)", code, body, err)
		}
	})
	notFound := []struct{ path, want string }{
		{"/containerLogs/default/nosuch/idle", "pod default/nosuch is not on node " + n.name},
		{"/containerLogs/default/refusals/nosuch", `container "nosuch" is not in pod default/refusals (its containers: idle)`},
		{"/exec/default/nosuch/idle?command=true&output=1", "pod default/nosuch is not on node " + n.name},
		{"/exec/default/refusals/nosuch?command=true&output=1", `container "nosuch" is not in pod default/refusals`},
		{"/exec/default/refusals/not-the-uid/idle?command=true&output=1", "has UID " + string(pod.UID) + ", not not-the-uid"},
		{"/attach/default/refusals/nosuch?output=1", `container "nosuch" is not in pod default/refusals`},
		{"/portForward/default/nosuch", "pod default/nosuch is not on node " + n.name},
	}
	for _, c := range notFound {
		code, body, err := n.get(t, admin, c.path)
		if err != nil || code != http.StatusNotFound || !strings.Contains(body, c.want) {
			t.Errorf("GET %s: %d %q (%v); want 404 %q", c.path, code, body, err, c.want)
		}
	}
	t.Run("exec without an upgrade", func(t *testing.T) {
		// The proxy insists on an upgrade; the kubelet's responder answers 500 too.
		code, body, _ := n.get(t, admin, "/exec/default/refusals/"+string(pod.UID)+"/idle?command=true&output=1")
		if code != http.StatusInternalServerError || !strings.Contains(body, "Upgrade request required") {
			t.Errorf("a plain GET of exec: %d %q; want 500 Upgrade request required", code, body)
		}
	})
}

// TestListenRefusesAPortInUse: a clear error, not a bind message.
func TestListenRefusesAPortInUse(t *testing.T) {
	ln, err := server.Listen("127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	_, err = server.Listen("127.0.0.1", port)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("127.0.0.1:%d is already in use", port)) {
		t.Errorf("second Listen on %d: %v", port, err)
	}
	if _, err := server.Listen("localhost", 0); err == nil || !strings.Contains(err.Error(), "is not an IP address") {
		t.Errorf("Listen(localhost): %v", err)
	}
}

// TestServingCertificate: the CSR is a kubelet-serving one from the node,
// for the node's IP; the key is 0600; a second start reuses it.
func TestServingCertificate(t *testing.T) {
	rt := critest.FakeCRI(t)
	n := startNode(t, "srv-cert", rt, false)
	ctx := context.Background()
	csrs, err := n.admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range csrs.Items {
		if c.Spec.Username == "system:node:"+n.name && c.Spec.SignerName == "kubernetes.io/kubelet-serving" {
			found = true
		}
	}
	if !found {
		t.Errorf("no kubernetes.io/kubelet-serving CSR from system:node:%s", n.name)
	}
	sc, err := server.ServingCertificate(ctx, server.ServingCertOptions{NodeName: n.name, Client: n.joined.Client,
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, Dir: n.joined.Dir, CA: n.ca})
	if err != nil {
		t.Fatal(err)
	}
	if sc.CSR != "" {
		t.Errorf("a valid stored certificate was not reused: new CSR %s", sc.CSR)
	}
	if ips := sc.Certificate.Leaf.IPAddresses; len(ips) != 1 || !ips[0].Equal(net.ParseIP("127.0.0.1")) {
		t.Errorf("IP SANs %v, want [127.0.0.1]", ips)
	}
	fi, err := os.Stat(sc.Path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v (%v), want 0600", sc.Path, fi.Mode().Perm(), err)
	}
	// Another IP: the stored certificate does not name it, so it is not reused.
	_, err = server.ServingCertificate(ctx, server.ServingCertOptions{NodeName: n.name, Client: n.joined.Client,
		IPs: []net.IP{net.ParseIP("127.0.0.2")}, Dir: n.joined.Dir, CA: n.ca, Approve: server.AdminApprover(n.admin, server.ApproverOptions{APIServer: testenv.AdminConfig(t).Host, LoopbackByDesign: true}), Timeout: 20 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "IP 127.0.0.2 is not an address of Node "+n.name) {
		t.Errorf("asking for an IP the Node does not have: %v; want the approver to refuse", err)
	}
}

// TestStopEndsSessionsWithoutLeaks: Serve returns with an exec session and
// a followed log open, and nothing of ours keeps running.
func TestStopEndsSessionsWithoutLeaks(t *testing.T) {
	testenv.ControlPlane(t)
	before := goleak.IgnoreCurrent()
	dir, err := os.MkdirTemp("", "srv-stop-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	mock, err := fakecri.Start(filepath.Join(dir, "cri.sock"), fakecri.WithImages("localhost/kubelet-labs/busybox:1.35.0"))
	if err != nil {
		t.Fatal(err)
	}
	defer mock.Stop()
	n := startNode(t, "srv-stop", critest.Runtime{Name: "fakecri", Endpoint: mock.Endpoint(), BusyboxImage: "localhost/kubelet-labs/busybox:1.35.0"}, true)
	pod := n.addPod(t, "stop", ticker)
	held := testenv.KubectlCmd(t, "exec", "-i", pod.Name, "--", "cat")
	stdin, err := held.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	heldOut, err := held.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	follow := testenv.KubectlCmd(t, "logs", "-f", pod.Name)
	followOut, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []interface{ Start() error }{held, follow} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	waitLines(t, followOut, "tick", 1, 30*time.Second)
	testenv.PollTrue(t, "the exec session to be open", 30*time.Second, func() bool {
		return strings.Contains(n.log.String(), "command=cat&error=1&input=1&output=1 [upgrade websocket: v5.channel.k8s.io] user=kube-apiserver-kubelet-client create nodes/proxy: allowed → upgraded: streaming")
	})
	// Open all the way to the runtime: a line through cat and back. Our
	// side is upgraded before the streams to the runtime's streaming server
	// exist; stopped in between, that server waits for them for its stream
	// creation timeout (30 s), which is not the stop this test is about.
	if _, err := io.WriteString(stdin, "ping\n"); err != nil {
		t.Fatal(err)
	}
	waitLines(t, heldOut, "ping", 1, 30*time.Second)
	stopped := make(chan struct{})
	go func() { stopNode(t, n); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(45 * time.Second):
		t.Fatal("the node server did not stop with sessions open")
	}
	for _, c := range []interface{ Wait() error }{held, follow} {
		_ = c.Wait() // kubectl ends when the apiserver sees our side close
	}
	stdin.Close()
	mock.Stop()
	goleak.VerifyNone(t, before,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"))
}

// TestExecNeedsCreate: a WebSocket exec is an HTTP GET, and upstream's
// kubelet authorizes a GET as `get nodes/proxy` (pkg/kubelet/server/
// auth.go:86-97), so a grant that reads like read-only access opens a shell
// in every pod of the node. Ours asks for `create nodes/proxy` on every
// path that runs or streams into a pod, whatever the HTTP method: a user
// granted only `get` may still read, but not exec, attach or port-forward;
// one granted `create` may exec over the same WebSocket GET.
func TestExecNeedsCreate(t *testing.T) {
	rt := critest.FakeCRI(t)
	n := startNode(t, "srv-execverb", rt, true)
	pod := n.addPod(t, "execverb", sleeper)
	reader := n.userWith(t, "execverb-reader", "get")
	execer := n.userWith(t, "execverb-execer", "create")

	t.Run("get nodes/proxy still reads", func(t *testing.T) {
		code, body, err := n.get(t, reader, "/pods")
		if err != nil || code != http.StatusOK || !strings.Contains(body, `"name":"execverb"`) {
			t.Errorf("GET /pods as a user granted get nodes/proxy: %d %.200q (%v); want 200 and the pod", code, body, err)
		}
	})
	t.Run("get nodes/proxy is refused exec, attach and port-forward", func(t *testing.T) {
		for _, c := range []struct{ path, protocol string }{
			{"/exec/default/execverb/idle?command=id&output=1&error=1", "v5.channel.k8s.io"},
			{"/exec/default/execverb/" + string(pod.UID) + "/idle?command=id&output=1&error=1", "v5.channel.k8s.io"},
			{"/attach/default/execverb/idle?output=1&error=1", "v5.channel.k8s.io"},
			// kubectl port-forward's: SPDY tunneled in a WebSocket.
			{"/portForward/default/execverb", "SPDY/3.1+portforward.k8s.io"},
		} {
			code, body := n.upgradeGet(t, reader, c.path, c.protocol)
			want := "Forbidden (user=execverb-reader, verb=create, resource=nodes, subresource(s)=[proxy])"
			if code != http.StatusForbidden || strings.TrimSpace(body) != want {
				t.Errorf("WebSocket GET %s (%s) as a user granted only get nodes/proxy: %d %q; want 403 %q", c.path, c.protocol, code, body, want)
			}
		}
		// What a WebSocket client (kubectl's executor) reports for the refusal.
		out, err := n.wsExec(t, reader, "/exec/default/execverb/idle?command=echo&command=hi&output=1&error=1")
		if err == nil || !strings.Contains(err.Error(), "403") {
			t.Errorf("client-go's WebSocket executor as the reader: stdout %q, error %v; want a 403 refusal", out, err)
		}
		t.Logf("client-go's WebSocket executor as the reader: %v", err)
	})
	t.Run("create nodes/proxy may exec", func(t *testing.T) {
		out, err := n.wsExec(t, execer, "/exec/default/execverb/idle?command=echo&command=hi&output=1&error=1")
		if err != nil || out != "hi\n" {
			t.Errorf("exec echo hi over a WebSocket GET as a user granted create nodes/proxy: %q (%v); want \"hi\\n\"", out, err)
		}
		if want := "GET /exec/default/execverb/idle?command=echo&command=hi&output=1&error=1 [upgrade websocket: v5.channel.k8s.io] user=execverb-execer create nodes/proxy: allowed"; !strings.Contains(n.log.String(), want) {
			t.Errorf("the node server's log lacks %q", want)
		}
	})
}
