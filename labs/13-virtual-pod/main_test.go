package main

import (
	"context"
	"fmt"
	"io"
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

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/labs/13-virtual-pod/virtualnode"
	"kubelet-labs/mycore/status"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func defaults(kubeconfig, nodeName string) options {
	return options{kubeconfig: kubeconfig, nodeName: nodeName, timeout: time.Minute,
		cacheTick: 100 * time.Millisecond, statusSync: 10 * time.Second, housekeeping: 2 * time.Second}
}

// startLab runs the lab in-process, with its own state folder.
func startLab(t *testing.T, nodeName string) *testenv.Lab[*lab] {
	t.Helper()
	cp := testenv.ControlPlane(t)
	t.Setenv(state.EnvVar, t.TempDir())
	o := defaults(cp.AdminKubeconfig(), nodeName)
	return testenv.StartLab(t, func(ctx context.Context, w io.Writer, ready func(*lab)) error {
		return run(ctx, o, labenv.NewPrinter(w), ready)
	})
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
	testenv.PollTrue(t, name+" "+string(phase), time.Minute, func() bool {
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
	testenv.PollTrue(t, "service account default/default", time.Minute, func() bool {
		_, err := admin.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
	cfg := testenv.AdminConfig(t)
	apiserver := strings.TrimSuffix(cfg.Host, "/")
	testenv.NoLeaks(t)
	const nodeName = "t13-virtual"
	node := startLab(t, nodeName)
	l, out := node.L, node.Out
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(ctx, nodeName, metav1.DeleteOptions{}) })

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
		if term := terminated(t, pod, "check"); term.ExitCode != virtualnode.ExitHTTPError || term.Reason != "Error" || !strings.Contains(term.Message, "403 Forbidden") {
			t.Errorf("terminated = %+v; want exit 22, Error, 403 Forbidden", term)
		}
	})

	t.Run("unknown command and bad argument", func(t *testing.T) {
		create(t, admin, examplePod(t, "typo.yaml", nodeName, apiserver))
		pod := waitPhase(t, admin, "typo", v1.PodFailed)
		if term := terminated(t, pod, "curl"); term.ExitCode != virtualnode.ExitNotFound || !strings.Contains(term.Message, "command not found") {
			t.Errorf("curl: %+v", term)
		}
		if term := terminated(t, pod, "noscheme"); term.ExitCode != virtualnode.ExitUsage || !strings.Contains(term.Message, "is not an http(s) URL") {
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
		testenv.PollTrue(t, "a few attempts", time.Minute, func() bool { return attempts() >= 3 })

		start := time.Now()
		if err := admin.CoreV1().Pods("default").Delete(ctx, "wait", metav1.DeleteOptions{}); err != nil { // kubectl delete pod wait
			t.Fatal(err)
		}
		testenv.PollTrue(t, "pod wait gone", time.Minute, func() bool {
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
		if term := terminated(t, last, "wait"); term.ExitCode != virtualnode.ExitStopped || !strings.Contains(term.Message, "stopped by the node") {
			t.Errorf("terminated = %+v; want exit 143, stopped by the node", term)
		}
		testenv.PollTrue(t, "the runtime to forget the pod", time.Minute, func() bool { return !slices.Contains(l.rt.PodUIDs(), pod.UID) })
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
		node.Stop() // the node dies; the apiserver still says Running

		again := startLab(t, nodeName)
		defer again.Stop()
		failed := waitPhase(t, admin, "again", v1.PodFailed)
		if term := terminated(t, failed, "wait"); term.ExitCode != 137 || term.Reason != "ContainerStatusUnknown" {
			t.Errorf("terminated = %+v; want 137 ContainerStatusUnknown", term)
		}
		if strings.Contains(again.Out.String(), "default/again wait: started") {
			t.Errorf("the restarted node ran the container again")
		}
		again.Stop()
	})
	// (NoLeaks checks at the end of the test that no goroutine is left.)
}

// TestClearErrors: bad flags and no cluster give one line, not a hang.
func TestClearErrors(t *testing.T) {
	t.Setenv(state.EnvVar, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := defaults(filepath.Join(t.TempDir(), "missing.kubeconfig"), "t13-bad")
	if err := run(ctx, o, labenv.NewPrinter(io.Discard), nil); err == nil || !strings.Contains(err.Error(), "missing.kubeconfig") {
		t.Errorf("missing kubeconfig: %v", err)
	}
	o.nodeName = "Bad_Name"
	if err := o.check(); err == nil || !strings.Contains(err.Error(), "--node-name") {
		t.Errorf("bad node name: %v", err)
	}
	o = defaults("", "t13-bad")
	o.cacheTick = 0
	if err := o.check(); err == nil || !strings.Contains(err.Error(), "--cache-tick") {
		t.Errorf("cache tick 0: %v", err)
	}
}
