package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/status"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func defaults(kubeconfig, nodeName string) options {
	return options{kubeconfig: kubeconfig, nodeName: nodeName, timeout: time.Minute,
		cacheTick: 100 * time.Millisecond, statusSync: 10 * time.Second, housekeeping: 2 * time.Second}
}

// startLab runs the lab in-process; stop ends it and waits for run to return.
func startLab(t *testing.T, nodeName string) (l *lab, out *testenv.SyncBuffer, stop func()) {
	t.Helper()
	cp := testenv.ControlPlane(t)
	t.Setenv(state.EnvVar, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	out = &testenv.SyncBuffer{}
	ready := make(chan *lab, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, defaults(cp.AdminKubeconfig(), nodeName), out, func(l *lab) { ready <- l })
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("run: %v", err)
		}
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("lab output:\n%s", out)
		}
	})
	select {
	case l = <-ready:
		return l, out, stop
	case err := <-errc:
		errc <- err
		t.Fatalf("run ended before it was ready: %v\n%s", err, out)
	case <-time.After(2 * time.Minute):
		t.Fatalf("not ready after 2m:\n%s", out)
	}
	return nil, nil, nil
}

func poll(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// examplePod reads one of the lab's YAML files, as kubectl apply -f
// would, bound to our test node and pointed at our test apiserver.
func examplePod(t *testing.T, file, nodeName, apiserver string, replace ...string) *v1.Pod {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var pod v1.Pod
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&pod); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	pod.Spec.NodeName = nodeName
	r := strings.NewReplacer(append([]string{"https://127.0.0.1:6443", apiserver}, replace...)...)
	for i := range pod.Spec.Containers {
		for j, a := range pod.Spec.Containers[i].Command {
			pod.Spec.Containers[i].Command[j] = r.Replace(a)
		}
	}
	return &pod
}

// observed records every phase the apiserver reports for one pod, in
// order, and the pod's last version before it was deleted.
type observed struct {
	mu      sync.Mutex
	phases  []v1.PodPhase
	last    *v1.Pod
	deleted bool
}

func (o *observed) snapshot() ([]v1.PodPhase, *v1.Pod, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.phases), o.last, o.deleted
}

// watchPod follows a pod by name as `kubectl get pod NAME -w` does.
func watchPod(t *testing.T, c kubernetes.Interface, name string) *observed {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	o := &observed{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range w.ResultChan() {
			p, ok := e.Object.(*v1.Pod)
			if !ok {
				continue
			}
			o.mu.Lock()
			if e.Type == watch.Deleted {
				o.deleted = true
			} else {
				o.last = p
				if p.Status.Phase != "" && (len(o.phases) == 0 || o.phases[len(o.phases)-1] != p.Status.Phase) {
					o.phases = append(o.phases, p.Status.Phase)
				}
			}
			o.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return o
}

func create(t *testing.T, c kubernetes.Interface, pod *v1.Pod) *v1.Pod {
	t.Helper()
	got, err := c.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.CoreV1().Pods("default").Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	return got
}

// waitPhase waits until the apiserver shows the pod in phase.
func waitPhase(t *testing.T, c kubernetes.Interface, name string, phase v1.PodPhase) *v1.Pod {
	t.Helper()
	var pod *v1.Pod
	poll(t, name+" "+string(phase), time.Minute, func() bool {
		p, err := c.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		pod = p
		return p.Status.Phase == phase
	})
	return pod
}

func terminated(t *testing.T, pod *v1.Pod, container string) *v1.ContainerStateTerminated {
	t.Helper()
	for _, c := range pod.Status.ContainerStatuses {
		if c.Name == container && c.State.Terminated != nil {
			return c.State.Terminated
		}
	}
	t.Fatalf("%s: container %s not terminated: %s", pod.Name, container, status.Describe(pod.Status))
	return nil
}

// inOrder: got is a subsequence of want's order and ends with want's last.
func inOrder(got, want []v1.PodPhase) bool {
	i := 0
	for _, p := range got {
		for i < len(want) && want[i] != p {
			i++
		}
		if i == len(want) {
			return false
		}
	}
	return len(got) > 0 && got[len(got)-1] == want[len(want)-1]
}

// TestVirtualPods drives the lab as a learner would, with kubectl's calls:
// each example pod is created, its phases watched, and its container's
// exit code and message read from the status; one is deleted while it
// works. Afterwards nothing of the lab is left running.
func TestVirtualPods(t *testing.T) {
	ctx := context.Background()
	admin := testenv.AdminClient(t)
	cp := testenv.ControlPlane(t)
	poll(t, "service account default/default", time.Minute, func() bool {
		_, err := admin.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
	cfg := testenv.AdminConfig(t)
	apiserver := strings.TrimSuffix(cfg.Host, "/")
	before := goleak.IgnoreCurrent()
	const nodeName = "t13-virtual"
	l, out, stop := startLab(t, nodeName)
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(ctx, nodeName, metav1.DeleteOptions{}) })
	_ = cp

	t.Run("readyz succeeds", func(t *testing.T) {
		seen := watchPod(t, admin, "readyz")
		start := time.Now()
		create(t, admin, examplePod(t, "readyz.yaml", nodeName, apiserver))
		pod := waitPhase(t, admin, "readyz", v1.PodSucceeded)
		t.Logf("create → Succeeded: %s", time.Since(start).Round(time.Millisecond))
		term := terminated(t, pod, "check")
		if term.ExitCode != 0 || term.Reason != "Completed" || !strings.Contains(term.Message, "200 OK: ok") {
			t.Errorf("terminated = %+v; want exit 0, Completed, a message with the answer", term)
		}
		if pod.Status.StartTime == nil || pod.Status.HostIP == "" || !strings.HasPrefix(pod.Status.ContainerStatuses[0].ContainerID, "virtual://") {
			t.Errorf("status lacks startTime, hostIP or containerID: %+v", pod.Status)
		}
		if phases, _, _ := seen.snapshot(); !inOrder(phases, []v1.PodPhase{v1.PodPending, v1.PodRunning, v1.PodSucceeded}) {
			t.Errorf("phases %v", phases)
		}
	})

	t.Run("Pending, Running, then Succeeded", func(t *testing.T) {
		var healthy atomic.Bool
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if !healthy.Load() {
				http.Error(w, "not yet", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "up")
		}))
		defer srv.Close()
		seen := watchPod(t, admin, "slow")
		pod := examplePod(t, "wait.yaml", nodeName, apiserver, "http://127.0.0.1:9999/", srv.URL, "--every=2s", "--every=200ms")
		pod.Name = "slow"
		start := time.Now()
		create(t, admin, pod)
		running := waitPhase(t, admin, "slow", v1.PodRunning)
		t.Logf("create → Running: %s", time.Since(start).Round(time.Millisecond))
		cs := running.Status.ContainerStatuses[0]
		if cs.State.Running == nil || !cs.Ready {
			t.Errorf("Running pod's container: %s", status.Describe(running.Status))
		}
		healthy.Store(true)
		done := waitPhase(t, admin, "slow", v1.PodSucceeded)
		if term := terminated(t, done, "wait"); term.ExitCode != 0 || !strings.Contains(term.Message, "after") {
			t.Errorf("terminated = %+v; want exit 0 after several attempts", term)
		}
		if phases, _, _ := seen.snapshot(); !inOrder(phases, []v1.PodPhase{v1.PodPending, v1.PodRunning, v1.PodSucceeded}) || !slices.Contains(phases, v1.PodRunning) {
			t.Errorf("phases %v, want Pending → Running → Succeeded", phases)
		} else {
			t.Logf("phases seen by a watch: %v", phases)
		}
	})

	t.Run("403 fails with exit 22", func(t *testing.T) {
		create(t, admin, examplePod(t, "forbidden.yaml", nodeName, apiserver))
		pod := waitPhase(t, admin, "forbidden", v1.PodFailed)
		if term := terminated(t, pod, "check"); term.ExitCode != exitHTTPError || term.Reason != "Error" || !strings.Contains(term.Message, "403 Forbidden") {
			t.Errorf("terminated = %+v; want exit 22, Error, 403 Forbidden", term)
		}
	})

	t.Run("unknown command and bad argument", func(t *testing.T) {
		create(t, admin, examplePod(t, "typo.yaml", nodeName, apiserver))
		pod := waitPhase(t, admin, "typo", v1.PodFailed)
		if term := terminated(t, pod, "curl"); term.ExitCode != exitNotFound || !strings.Contains(term.Message, "command not found") {
			t.Errorf("curl: %+v", term)
		}
		if term := terminated(t, pod, "noscheme"); term.ExitCode != exitUsage || !strings.Contains(term.Message, "is not an http(s) URL") {
			t.Errorf("noscheme: %+v", term)
		}
	})

	t.Run("restartPolicy Always is rejected", func(t *testing.T) {
		create(t, admin, examplePod(t, "always.yaml", nodeName, apiserver))
		pod := waitPhase(t, admin, "always", v1.PodFailed)
		if pod.Status.Reason != "UnsupportedRestartPolicy" || !strings.HasPrefix(pod.Status.Message, "Pod was rejected: ") {
			t.Errorf("reason %q message %q", pod.Status.Reason, pod.Status.Message)
		}
		if l.rt.Has(pod.UID, "check") {
			t.Errorf("a rejected pod's container was started")
		}
	})

	t.Run("delete while running cancels the work", func(t *testing.T) {
		// Nothing listens on a port we just closed: connection refused, retried.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := "http://" + ln.Addr().String() + "/"
		ln.Close()
		seen := watchPod(t, admin, "wait")
		pod := create(t, admin, examplePod(t, "wait.yaml", nodeName, apiserver, "http://127.0.0.1:9999/", closed, "--every=2s", "--every=200ms"))
		waitPhase(t, admin, "wait", v1.PodRunning)
		attempts := func() int { return strings.Count(out.String(), "default/wait wait attempt") }
		poll(t, "a few attempts", time.Minute, func() bool { return attempts() >= 3 })

		start := time.Now()
		if err := admin.CoreV1().Pods("default").Delete(ctx, "wait", metav1.DeleteOptions{}); err != nil { // kubectl delete pod wait
			t.Fatal(err)
		}
		poll(t, "pod wait gone", time.Minute, func() bool {
			_, err := admin.CoreV1().Pods("default").Get(ctx, "wait", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
		t.Logf("delete → pod object gone: %s", time.Since(start).Round(time.Millisecond))
		n := attempts()
		time.Sleep(time.Second) // five attempt periods
		if attempts() != n {
			t.Errorf("the work went on after the pod was deleted")
		}
		_, last, _ := seen.snapshot()
		if last == nil || last.Status.Phase != v1.PodFailed {
			t.Fatalf("last status before the delete: %v", last)
		}
		if term := terminated(t, last, "wait"); term.ExitCode != exitStoppedByTER || !strings.Contains(term.Message, "stopped by the node") {
			t.Errorf("terminated = %+v; want exit 143, stopped by the node", term)
		}
		poll(t, "the runtime to forget the pod", time.Minute, func() bool { return !slices.Contains(l.rt.PodUIDs(), pod.UID) })
	})

	t.Run("a pod running when the node restarts is not run twice", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := "http://" + ln.Addr().String() + "/"
		ln.Close()
		pod := examplePod(t, "wait.yaml", nodeName, apiserver, "http://127.0.0.1:9999/", closed)
		pod.Name = "again"
		create(t, admin, pod)
		waitPhase(t, admin, "again", v1.PodRunning)
		stop() // the node dies; the apiserver still says Running

		_, out2, stop2 := startLab(t, nodeName)
		defer stop2()
		failed := waitPhase(t, admin, "again", v1.PodFailed)
		if term := terminated(t, failed, "wait"); term.ExitCode != 137 || term.Reason != "ContainerStatusUnknown" {
			t.Errorf("terminated = %+v; want 137 ContainerStatusUnknown", term)
		}
		if strings.Contains(out2.String(), "default/again wait: started") {
			t.Errorf("the restarted node ran the container again")
		}
		stop2()
	})

	stop()
	goleak.VerifyNone(t, before,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		// client-go keeps one HTTP/2 connection per TLS config in a
		// process-wide transport cache; not a goroutine of the lab.
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"))
}

// TestClearErrors: bad flags and no cluster give one line, not a hang.
func TestClearErrors(t *testing.T) {
	t.Setenv(state.EnvVar, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := defaults(filepath.Join(t.TempDir(), "missing.kubeconfig"), "t13-bad")
	if err := run(ctx, o, &testenv.SyncBuffer{}, nil); err == nil || !strings.Contains(err.Error(), "missing.kubeconfig") {
		t.Errorf("missing kubeconfig: %v", err)
	}
	o.nodeName = "Bad_Name"
	if err := run(ctx, o, &testenv.SyncBuffer{}, nil); err == nil || !strings.Contains(err.Error(), "--node-name") {
		t.Errorf("bad node name: %v", err)
	}
	o = defaults("", "t13-bad")
	o.cacheTick = 0
	if err := run(ctx, o, &testenv.SyncBuffer{}, nil); err == nil || !strings.Contains(err.Error(), "--cache-tick") {
		t.Errorf("cache tick 0: %v", err)
	}
}

// TestInterpreter: the exit codes, by the kind of failure, without a cluster.
func TestInterpreter(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "hello")
	}))
	defer srv.Close()
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer tlsSrv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/"
	ln.Close()

	in := &interpreter{client: &http.Client{}, logf: func(string, ...any) {}}
	in.client.Transport = &http.Transport{DisableKeepAlives: true}
	for _, tc := range []struct {
		argv []string
		code int
		msg  string
	}{
		{[]string{"http-get", srv.URL}, exitOK, "200 OK: hello"},
		{[]string{"http-get", srv.URL + "/missing"}, exitHTTPError, "404 Not Found"},
		{[]string{"http-get", closed}, exitConnect, "connection refused"},
		{[]string{"http-get", "--retry-for=300ms", "--every=100ms", closed}, exitConnect, "attempts"},
		{[]string{"http-get", tlsSrv.URL}, exitTLS, "certificate"},
		{[]string{"http-get", "http://no-such-host.invalid/"}, exitResolve, "no-such-host.invalid"},
		{[]string{"wget", srv.URL}, exitNotFound, "wget: command not found"},
		{nil, exitNotFound, "no command"},
		{[]string{"http-get"}, exitUsage, "want exactly one URL"},
		{[]string{"http-get", "--every=0s", srv.URL}, exitUsage, "--every"},
		{[]string{"http-get", "--bogus", srv.URL}, exitUsage, "flag provided but not defined"},
		{[]string{"http-get", "ftp://x/"}, exitUsage, "not an http(s) URL"},
	} {
		r := in.run(context.Background(), "test", tc.argv)
		if r.exitCode != tc.code || !strings.Contains(r.message, tc.msg) {
			t.Errorf("%q: exit %d %q; want %d and %q", tc.argv, r.exitCode, r.message, tc.code, tc.msg)
		}
	}

	// Cancelled while it waits between attempts: stops at once with 143.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	r := in.run(ctx, "test", []string{"http-get", "--retry-for=1m", "--every=100ms", closed})
	if r.exitCode != exitStoppedByTER || time.Since(start) > 5*time.Second {
		t.Errorf("cancelled: exit %d %q after %s", r.exitCode, r.message, time.Since(start))
	}
}
