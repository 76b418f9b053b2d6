package main

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"kubelet-labs/internal/critest"
	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/kubelet"
)

const testNode = "t18-mykubelet"

// startNode runs the single node in-process on runtime (a --runtime value)
// at endpoint, with a fast crash-loop back-off.
func startNode(t *testing.T, runtime, endpoint string) *testenv.Lab[*nodeLab] {
	t.Helper()
	cp := testenv.ControlPlane(t)
	dir := t.TempDir()
	t.Setenv(state.EnvVar, dir)
	o := nodeOptions{kubeconfig: cp.AdminKubeconfig(), nodeName: testNode, runtime: runtime, endpoint: endpoint, podLogsDir: filepath.Join(dir, "pod-logs"),
		address: "127.0.0.1", port: 0, relist: time.Second, backOffInit: time.Second, backOffMax: 4 * time.Second,
		shutdownGrace: 10 * time.Second, timeout: time.Minute}
	return testenv.StartLab(t, func(ctx context.Context, out io.Writer, onReady func(*nodeLab)) error {
		return runNode(ctx, o, out, onReady)
	})
}

// manifest reads one of the lab's pod files, as kubectl apply -f does,
// into namespace ns, bound to the test's node.
func manifest(t *testing.T, file, ns string) *v1.Pod {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var p v1.Pod
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&p); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	p.Namespace = ns
	if p.Spec.NodeName != "" {
		p.Spec.NodeName = testNode
	}
	return &p
}

func create(t *testing.T, c kubernetes.Interface, p *v1.Pod) *v1.Pod {
	t.Helper()
	got, err := c.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// waitPod polls the pod until cond holds.
func waitPod(t *testing.T, c kubernetes.Interface, ns, name, what string, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	var last *v1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = p
		return cond(p), nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s not %s: %+v", ns, name, what, last)
	}
	return last
}

func ready(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func namespace(t *testing.T, c kubernetes.Interface) string {
	t.Helper()
	ns, err := c.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "lab18-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
	return ns.Name
}

// TestMyKubeletOnContainerd is the README's walk-through on containerd 2.2:
// the web pod with its probes goes Running and Ready with a pod IP, and
// kubectl logs, exec and port-forward reach it; a crashing container goes
// to CrashLoopBackOff with its restartCount growing; a container that
// ignores SIGTERM dies at its grace period; a static pod runs with its
// mirror pod; Ctrl-C stops every pod (Failed, Terminated) and leaves
// nothing of the node in the runtime.
func TestMyKubeletOnContainerd(t *testing.T) {
	testenv.NoLeaks(t)
	critest.Require(t, slicesHas(critest.Flavours(), "2.2") || !critest.InCI(), "containerd 2.2 is not under test (LABS_CONTAINERD)")
	rt := critest.ContainerdFlavour(t, "2.2")
	admin := testenv.AdminClient(t)
	ns := namespace(t, admin)
	lab := startNode(t, "containerd-2.2", rt.Endpoint)
	crc := critest.Dial(t, rt)
	ctx := context.Background()

	// The web pod: Running, Ready (its readiness probe passed), a pod IP.
	web := create(t, admin, manifest(t, "web.yaml", ns))
	web = waitPod(t, admin, ns, web.Name, "Ready", ready)
	if web.Status.Phase != v1.PodRunning || web.Status.PodIP == "" || web.Status.HostIP != "127.0.0.1" {
		t.Errorf("web: phase %s, podIP %q, hostIP %q; want Running with a pod IP on 127.0.0.1", web.Status.Phase, web.Status.PodIP, web.Status.HostIP)
	}
	t.Logf("web Ready %s after its creation, pod IP %s", readySince(web), web.Status.PodIP)

	// kubectl through the apiserver into our node server.
	if out, errOut, code := testenv.Kubectl(t, "", "-n", ns, "logs", "web"); code != 0 || !strings.Contains(out, "httpd listening on 8080") {
		t.Errorf("kubectl logs web: %q, exit %d, %q", out, code, errOut)
	}
	if out, errOut, code := testenv.Kubectl(t, "", "-n", ns, "exec", "web", "--", "hostname"); code != 0 || out != "web\n" {
		t.Errorf("kubectl exec web -- hostname: %q, exit %d, %q", out, code, errOut)
	}
	if got := testenv.PortForwardGet(t, ns, "pod/web", "8080", "/"); !strings.Contains(got, "hello from web") {
		t.Errorf("GET / through kubectl port-forward: %q", got)
	}

	// A crash loop: the reason shows while the back-off waits, and the
	// restarts go on.
	crash := create(t, admin, manifest(t, "crash.yaml", ns))
	sawBackOff := false
	waitPod(t, admin, ns, crash.Name, "in CrashLoopBackOff with 3 restarts", func(p *v1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
				sawBackOff = true
			}
			return sawBackOff && cs.RestartCount >= 3
		}
		return false
	})

	// SIGTERM ignored: the container dies at the grace period (5 s), by
	// SIGKILL — not before, and not much later.
	stubborn := create(t, admin, manifest(t, "stubborn.yaml", ns))
	waitPod(t, admin, ns, stubborn.Name, "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	start := time.Now()
	if out, errOut, code := testenv.Kubectl(t, "", "-n", ns, "delete", "pod", "stubborn"); code != 0 {
		t.Fatalf("kubectl delete pod stubborn: %q, exit %d, %q", out, code, errOut)
	}
	took := time.Since(start)
	stopped := regexp.MustCompile(`stubborn/app stopped after ([0-9.]+)s`).FindStringSubmatch(lab.Out.String())
	if stopped == nil {
		t.Fatalf("no 'stubborn/app stopped after' line in the output")
	}
	after, _ := strconv.ParseFloat(stopped[1], 64)
	if after < 5 || took < 5*time.Second || took > 40*time.Second {
		t.Errorf("stubborn: stopped %.2fs after the kill began, kubectl delete took %s; want at its 5 s grace", after, took)
	}
	t.Logf("stubborn: stopped %.2fs after SIGTERM; kubectl delete returned after %s", after, took.Round(time.Millisecond))

	// A static pod: the file is the pod; its mirror pod shows it.
	b, err := os.ReadFile("static-clock.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lab.L.static, "clock.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	mirror := waitPod(t, admin, metav1.NamespaceDefault, "clock-"+testNode, "Running (mirror pod)", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	if _, ok := mirror.Annotations["kubernetes.io/config.mirror"]; !ok {
		t.Errorf("clock-%s has no config.mirror annotation: %v", testNode, mirror.Annotations)
	}
	if err := os.Remove(filepath.Join(lab.L.static, "clock.yaml")); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := admin.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, "clock-"+testNode, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("mirror pod clock-%s still there a minute after its manifest was removed", testNode)
	}

	// Ctrl-C: a graceful node shutdown, then nothing of ours in the runtime.
	lab.Stop()
	for _, name := range []string{"web", "crash"} {
		p, err := admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Status.Phase != v1.PodFailed || p.Status.Reason != kubelet.ShutdownReason {
			t.Errorf("%s after Ctrl-C: phase %s reason %q, want Failed %q", name, p.Status.Phase, p.Status.Reason, kubelet.ShutdownReason)
		}
	}
	left, err := crc.Pods(ctx, map[string]string{kubelet.NodeLabel: testNode})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("after Ctrl-C the runtime still has %d sandbox(es) of %s", len(left), testNode)
	}
}

// readySince is how long after its creation the pod became Ready.
func readySince(p *v1.Pod) time.Duration {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.LastTransitionTime.Sub(p.CreationTimestamp.Time)
		}
	}
	return 0
}

func slicesHas(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestNodeErrors: what a learner gets wrong fails at once, with a message
// that says what to do, and registers nothing.
func TestNodeErrors(t *testing.T) {
	testenv.NoLeaks(t)
	cp := testenv.ControlPlane(t)
	admin := testenv.AdminClient(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	base := nodeOptions{kubeconfig: cp.AdminKubeconfig(), nodeName: "t18-bad", runtime: "mock", address: "127.0.0.1",
		relist: time.Second, backOffInit: time.Second, backOffMax: time.Second, timeout: 30 * time.Second}
	for _, tc := range []struct {
		name string
		set  func(o *nodeOptions)
		want string
	}{
		{"no cluster", func(o *nodeOptions) { o.kubeconfig = filepath.Join(t.TempDir(), "nothing.kubeconfig") }, "kubeconfig"},
		{"no runtime", func(o *nodeOptions) {
			o.runtime, o.endpoint = "containerd", "unix://"+filepath.Join(t.TempDir(), "containerd.sock")
		}, "containerd-up.sh"},
		{"unknown runtime", func(o *nodeOptions) { o.runtime = "docker" }, "containerd-2.2"},
		{"port in use", func(o *nodeOptions) { o.port = busyPort }, "already in use"},
		{"bad node name", func(o *nodeOptions) { o.nodeName = "Not_A_Name" }, "not a valid Node name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(state.EnvVar, t.TempDir())
			o := base
			tc.set(&o)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := runNode(ctx, o, io.Discard, func(*nodeLab) { t.Error("the node came up") })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error that says %q", err, tc.want)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("it hung until the test's deadline: %v", err)
			}
		})
	}
	if _, err := admin.CoreV1().Nodes().Get(context.Background(), "t18-bad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node t18-bad registered by a run that failed (err %v)", err)
	}
}
