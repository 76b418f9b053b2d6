package kuberuntime_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"kubelet-labs/internal/critest"
	"kubelet-labs/mycore/kuberuntime"
	"kubelet-labs/mycore/plegruntime"
)

// hookEnv is a runtime manager on the real containerd with what the node
// gives it: a pod folder (for /etc/hosts and termination-log files) and an
// event recorder whose events the test reads.
type hookEnv struct {
	*killEnv
	events *record.FakeRecorder
}

func newHookEnv(t *testing.T) *hookEnv {
	t.Helper()
	noLeaks(t)
	rt := critest.Containerd(t)
	e := &hookEnv{killEnv: &killEnv{rt: rt, logDir: t.TempDir()}, events: record.NewFakeRecorder(100)}
	podsDir := t.TempDir()
	e.cri = critest.Dial(t, rt)
	e.m = kuberuntime.New(e.cri, kuberuntime.Options{PodLogsDir: e.logDir, PodsDir: podsDir, Recorder: e.events, ClusterDomain: "cluster.local", Log: func(f string, a ...any) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.lines = append(e.lines, strings.TrimSpace(fmt.Sprintf(f, a...)))
	}})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("manager log:\n  %s", strings.Join(e.log(), "\n  "))
		}
	})
	return e
}

// run creates the pod's sandbox and starts its containers in order with
// the sandbox's IPs, as SyncPod does; the error of the first start that
// fails is returned with the IDs so far.
func (e *hookEnv) run(t *testing.T, pod *v1.Pod) (ips []string, ids map[string]string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].Image = e.rt.BusyboxImage
	}
	sandboxID, err := e.m.CreateSandbox(ctx, pod, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.removeAll(t, pod.UID) })
	st, err := e.cri.PodStatus(ctx, sandboxID)
	if err != nil {
		t.Fatal(err)
	}
	if ip := st.GetNetwork().GetIp(); ip != "" {
		ips = append(ips, ip)
	}
	cfg := sandboxConfig(t, e.m, pod)
	ids = map[string]string{}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		id, err := e.m.StartContainer(ctx, sandboxID, cfg, pod, c, &kubecontainer.PodStatus{}, kuberuntime.PodIPs{PodIPs: ips})
		if id != "" {
			ids[c.Name] = id
		}
		if err != nil {
			return ips, ids, err
		}
	}
	return ips, ids, nil
}

func (e *hookEnv) exec(t *testing.T, id string, cmd ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := e.cri.Exec(ctx, id, cmd, 20*time.Second)
	if err != nil {
		t.Fatalf("exec %v: %v", cmd, err)
	}
	return string(res.Stdout) + string(res.Stderr)
}

// eventsSoFar drains the recorder: "Type Reason Message" lines.
func (e *hookEnv) eventsSoFar() []string {
	var out []string
	for {
		select {
		case ev := <-e.events.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func hasEvent(events []string, prefix string) bool {
	for _, ev := range events {
		if strings.HasPrefix(ev, prefix) {
			return true
		}
	}
	return false
}

// A postStart exec hook runs in the container right after it starts, and
// StartContainer returns only once it has: the file it wrote is there at
// once. The container's events are upstream's: Pulled, Created, Started.
func TestPostStartExecHookOnRuntime(t *testing.T) {
	e := newHookEnv(t)
	c := ctr("app", "sleep 600")
	c.Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo started by the hook > /tmp/poststart"}}}}
	_, ids, err := e.run(t, killPod("poststart", 1, c))
	if err != nil {
		t.Fatal(err)
	}
	if got := e.exec(t, ids["app"], "cat", "/tmp/poststart"); got != "started by the hook\n" {
		t.Errorf("/tmp/poststart in the container: %q, want the hook's line", got)
	}
	evs := e.eventsSoFar()
	for _, want := range []string{"Normal Pulled Container image", "Normal Created Container created", "Normal Started Container started"} {
		if !hasEvent(evs, want) {
			t.Errorf("events %q: no %q", evs, want)
		}
	}
}

// A postStart hook that fails kills its container: StartContainer reports
// PostStartHookError with the hook's output, the container has exited,
// and the events say FailedPostStartHook (without the output: it may hold
// secrets) and Killing.
func TestFailingPostStartHookKillsTheContainerOnRuntime(t *testing.T) {
	e := newHookEnv(t)
	c := ctr("app", "sleep 600")
	c.Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo secret-ish output; exit 3"}}}}
	_, ids, err := e.run(t, killPod("poststart-fails", 1, c))
	if !kuberuntime.IsPostStartHookError(err) {
		t.Fatalf("StartContainer: %v, want a postStart hook error", err)
	}
	if !strings.Contains(err.Error(), "secret-ish output") {
		t.Errorf("error %q does not carry the hook's output", err)
	}
	if st := e.status(t, ids["app"]); st.State != 2 /* CONTAINER_EXITED */ {
		t.Errorf("container state %s after the failed hook, want exited", st.State)
	}
	evs := e.eventsSoFar()
	if !hasEvent(evs, "Warning FailedPostStartHook PostStartHook failed") || !hasEvent(evs, "Normal Killing FailedPostStartHook") {
		t.Errorf("events %q: want FailedPostStartHook and Killing", evs)
	}
	for _, ev := range evs {
		if strings.Contains(ev, "secret-ish") {
			t.Errorf("event %q carries the hook's output", ev)
		}
	}
}

// HTTP hooks: a postStart httpGet to a server on the node (host set) with
// the pod's headers, over HTTPS with a certificate no one can verify (the
// kubelet's client accepts it), and a preStop httpGet without a host, which
// goes to the pod's IP: busybox httpd in the container logs the request
// (httpd, PID 1, ignores SIGTERM: the kill takes the 2 s minimum).
func TestHTTPHooksOnRuntime(t *testing.T) {
	e := newHookEnv(t)
	var mu sync.Mutex
	var got []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r.URL.Path+" "+r.Header.Get("X-Hook"))
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = ln
	srv.StartTLS()
	defer srv.Close()
	port, _ := strconv.Atoi(srv.URL[strings.LastIndex(srv.URL, ":")+1:])

	c := ctr("web", "echo hello > /tmp/index.html; echo bye > /tmp/prestop; exec httpd -f -vv -p 8080 -h /tmp")
	c.Lifecycle = &v1.Lifecycle{
		PostStart: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromInt(port), Path: "/poststart", Scheme: v1.URISchemeHTTPS,
			HTTPHeaders: []v1.HTTPHeader{{Name: "X-Hook", Value: "from-the-pod-spec"}}}},
		PreStop: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt(8080), Path: "/prestop"}},
	}
	pod := killPod("httphooks", 1, c)
	_, ids, err := e.run(t, pod)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(got) != 1 || got[0] != "/poststart from-the-pod-spec" {
		t.Errorf("HTTPS server got %q, want one GET /poststart with the X-Hook header", got)
	}
	mu.Unlock()
	e.waitForHTTPD(t, ids["web"])
	if r := e.m.KillContainer(context.Background(), pod, kubecontainer.ContainerID{ID: ids["web"]}, "web", kuberuntime.ReasonUnknown, nil); r.Error != nil {
		t.Fatal(r.Error)
	}
	lines, err := e.cri.ContainerLog(context.Background(), ids["web"])
	if err != nil {
		t.Fatal(err)
	}
	var log []string
	for _, l := range lines {
		log = append(log, l.Text)
	}
	if !strings.Contains(strings.Join(log, "\n"), "url:/prestop") {
		t.Errorf("httpd's log has no preStop request:\n%s", strings.Join(log, "\n"))
	}
	if evs := e.eventsSoFar(); hasEvent(evs, "Warning FailedPreStopHook") {
		t.Errorf("events %q: the preStop hook failed", evs)
	}
}

// waitForHTTPD: httpd listens once it answers a request from inside.
func (e *hookEnv) waitForHTTPD(t *testing.T, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := e.cri.Exec(ctx, id, []string{"wget", "-q", "-O", "-", "http://127.0.0.1:8080/index.html"}, 5*time.Second)
		cancel()
		if err == nil && res.ExitCode == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("httpd did not answer in 30s: %v %v", err, res)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// What a container writes to its terminationMessagePath is its status's
// message once it exited — also as a non-root user, and at a path of its
// own; with FallbackToLogsOnError, a container that failed and wrote
// nothing there gets its log's tail instead; one that succeeded does not.
func TestTerminationMessageOnRuntime(t *testing.T) {
	e := newHookEnv(t)
	uid := int64(1000)
	file := ctr("file", "echo -n written by the container > /dev/termination-log")
	file.TerminationMessagePath = "/dev/termination-log"
	other := ctr("nonroot", "echo -n custom path > /tmp/my-message; exit 2")
	other.TerminationMessagePath = "/tmp/my-message"
	other.SecurityContext = &v1.SecurityContext{RunAsUser: &uid}
	logs := ctr("logs", "echo first line; echo the last words; exit 1")
	logs.TerminationMessagePath, logs.TerminationMessagePolicy = "/dev/termination-log", v1.TerminationMessageFallbackToLogsOnError
	ok := ctr("ok", "echo nothing to report")
	ok.TerminationMessagePath, ok.TerminationMessagePolicy = "/dev/termination-log", v1.TerminationMessageFallbackToLogsOnError
	pod := killPod("termmsg", 1, file, other, logs, ok)
	if _, _, err := e.run(t, pod); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"file": "written by the container", "nonroot": "custom path", "logs": "first line\nthe last words\n", "ok": ""}
	r := plegruntime.New(e.cri)
	deadline := time.Now().Add(time.Minute)
	for {
		rp, err := r.GetPod(context.Background(), pod.UID)
		if err != nil {
			t.Fatal(err)
		}
		st, err := r.GetPodStatus(context.Background(), rp)
		if err != nil {
			t.Fatal(err)
		}
		exited := 0
		for _, cs := range st.ContainerStatuses {
			if cs.State == kubecontainer.ContainerStateExited {
				exited++
			}
		}
		if exited == len(want) {
			for _, cs := range st.ContainerStatuses {
				if cs.Message != want[cs.Name] {
					t.Errorf("%s (exit %d): message %q, want %q", cs.Name, cs.ExitCode, cs.Message, want[cs.Name])
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d containers exited in a minute", exited, len(want))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// /etc/hosts in a container is the kubelet's: localhost, the pod's IP with
// its hostname — fully qualified with a subdomain — and its hostAliases.
func TestManagedEtcHostsOnRuntime(t *testing.T) {
	e := newHookEnv(t)
	pod := killPod("etchosts", 1, ctr("app", "sleep 600"))
	pod.Spec.Hostname, pod.Spec.Subdomain = "myhost", "mysub"
	pod.Spec.HostAliases = []v1.HostAlias{{IP: "10.9.8.7", Hostnames: []string{"foo.local", "bar.local"}}}
	ips, ids, err := e.run(t, pod)
	if err != nil {
		t.Fatal(err)
	}
	if len(ips) == 0 {
		t.Fatal("the sandbox has no IP")
	}
	got := e.exec(t, ids["app"], "cat", "/etc/hosts")
	for _, want := range []string{
		"# Kubernetes-managed hosts file.\n",
		"127.0.0.1\tlocalhost\n",
		ips[0] + "\tmyhost.mysub." + pod.Namespace + ".svc.cluster.local\tmyhost\n",
		"# Entries added by HostAliases.\n10.9.8.7\tfoo.local\tbar.local\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("/etc/hosts in the container:\n%s\nhas no %q", got, want)
		}
	}
}
