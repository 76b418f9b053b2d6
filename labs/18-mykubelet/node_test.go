package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"kubelet-labs/internal/critest"
	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/mykubelet"
	nodepkg "kubelet-labs/mycore/node"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// startNode runs the single node in-process as nodeName on runtime (a
// --runtime value) at endpoint, with a fast crash-loop back-off.
func startNode(t *testing.T, nodeName, runtime, endpoint string, more ...func(*options)) *testenv.Lab[*nodeLab] {
	t.Helper()
	cp := testenv.ControlPlane(t)
	dir := t.TempDir()
	t.Setenv(state.EnvVar, dir)
	o := options{kubeconfig: cp.AdminKubeconfig(), nodeName: nodeName,
		runtime: labruntime.Flags{Kind: runtime, Endpoint: endpoint, PodLogsDir: filepath.Join(dir, "pod-logs")},
		address: "127.0.0.1", port: 0, relist: time.Second, backOffInit: time.Second, backOffMax: 4 * time.Second,
		shutdownGrace: 10 * time.Second, timeout: time.Minute}
	for _, f := range more {
		f(&o)
	}
	return testenv.StartLab(t, func(ctx context.Context, out io.Writer, onReady func(*nodeLab)) error {
		return run(ctx, o, labenv.NewPrinter(out), onReady)
	})
}

// hinted is what the lab told the learner to try: the files of its
// `kubectl apply -f` lines and of its `cp … static pod folder` line, as
// paths from the repository root.
type hinted struct {
	apply  []string
	static string
}

func hintsOf(t *testing.T, out string) hinted {
	t.Helper()
	var h hinted
	for _, m := range regexp.MustCompile(`kubectl apply -f (\S+)`).FindAllStringSubmatch(out, -1) {
		h.apply = append(h.apply, m[1])
	}
	if m := regexp.MustCompile(`\n  cp (\S+) `).FindStringSubmatch(out); m != nil {
		h.static = m[1]
	}
	if len(h.apply) == 0 || h.static == "" {
		t.Fatalf("the lab printed no manifests to apply or copy:\n%s", out)
	}
	return h
}

// local is a path the lab printed (from the repository root) as seen from
// this package's folder, where the test runs.
func local(t *testing.T, path string) string {
	t.Helper()
	rest, ok := strings.CutPrefix(path, "labs/18-mykubelet/")
	if !ok {
		t.Fatalf("%s is not a file of lab 18", path)
	}
	return rest
}

// manifest reads one of the lab's pod files, as kubectl apply -f does,
// into namespace ns, bound to nodeName.
func manifest(t *testing.T, file, ns, nodeName string) *v1.Pod {
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
		p.Spec.NodeName = nodeName
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
	testenv.PollTrue(t, "pod "+ns+"/"+name+" "+what, 2*time.Minute, func() bool {
		p, err := c.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		last = p
		return cond(p)
	})
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

// TestMyKubeletOnContainerd is the README's walk-through on containerd 2.2,
// with the files the lab prints: the web pod with its probes goes Running
// and Ready with a pod IP, and kubectl logs, exec and port-forward reach
// it; a crashing container goes to CrashLoopBackOff with its restartCount
// growing; a container that ignores SIGTERM dies at its grace period; a
// static pod runs with its mirror pod; Ctrl-C stops every pod (Failed,
// Terminated) and leaves nothing of the node in the runtime.
func TestMyKubeletOnContainerd(t *testing.T) {
	testenv.NoLeaks(t)
	critest.Require(t, slices.Contains(critest.Flavours(), "2.2") || !critest.InCI(), "containerd 2.2 is not under test (LABS_CONTAINERD)")
	rt := critest.ContainerdFlavour(t, "2.2")
	const node = "t18-mykubelet"
	lab := startNode(t, node, "containerd-2.2", rt.Endpoint)
	crc := critest.Dial(t, rt)
	walkThrough(t, lab, node, walk{web: "labs/18-mykubelet/web.yaml", log: "httpd listening on 8080", page: "hello from web", runtime: `^containerd://2\.2\.\d+$`})

	left, err := crc.Pods(context.Background(), map[string]string{mykubelet.NodeLabel: node})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("after Ctrl-C the runtime still has %d sandbox(es) of %s", len(left), node)
	}
}

// TestMyKubeletOnTheMock: the same walk-through on --runtime mock, the path
// without root. What the lab prints there must run there: the mock has no
// httpd and no $(...), so it must print web-mock.yaml, not web.yaml, and
// every file it prints must become Running (and Ready, or crash-loop as
// its hint says) on the mock.
func TestMyKubeletOnTheMock(t *testing.T) {
	testenv.NoLeaks(t)
	const node = "t18-mock"
	lab := startNode(t, node, labruntime.Mock, "")
	walkThrough(t, lab, node, walk{web: "labs/18-mykubelet/web-mock.yaml", log: "web on the mock CRI", page: "hello from the mock CRI: port 8080 of sandbox", runtime: `^fakecri://0\.1\.0$`})
	// The mock ends with the lab: what Ctrl-C removed is in its last lines.
	m := regexp.MustCompile(`stopped   removed \d+ container\(s\), (\d+) sandbox`).FindStringSubmatch(lab.Out.String())
	if m == nil {
		t.Errorf("after Ctrl-C the lab did not say what it removed from the runtime")
	} else if n, _ := strconv.Atoi(m[1]); n < 2 {
		t.Errorf("after Ctrl-C the lab did not say it removed web's and crash's sandboxes: %q", m)
	}
}

// walk is what differs between runtimes: the web pod's file, a line of its
// log, what its port 8080 answers, and what the Node says its runtime is
// (a regular expression for containerRuntimeVersion).
type walk struct{ web, log, page, runtime string }

func walkThrough(t *testing.T, lab *testenv.Lab[*nodeLab], node string, w walk) {
	admin := testenv.AdminClient(t)
	ns := testenv.Namespace(t, admin, "lab18")
	ctx := context.Background()
	// our whole kubelet takes any pod a scheduler places there: unlike the
	// other labs' nodes it registers without the NoSchedule taint. The
	// controller-manager's node lifecycle controller may still hold its own
	// node.kubernetes.io/not-ready taint for a moment after Ready; it must go.
	testenv.PollNil(t, "node "+node+" without taints", 2*time.Minute, func() error {
		n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, tn := range n.Spec.Taints {
			if tn.Key == nodepkg.NoRuntimeTaint.Key {
				t.Fatalf("node %s registered with the labs' taint %v", node, tn)
			}
		}
		if len(n.Spec.Taints) > 0 {
			return fmt.Errorf("taints %v", n.Spec.Taints)
		}
		return nil
	})
	// The node tells the truth about itself, as the kubelet's MachineInfo
	// and VersionInfo setters do: this machine's OS image, kernel and IDs
	// (the lab runs in this process, so node.ThisHost is what it read),
	// and its runtime's name and version from the CRI Version call.
	n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	host, info := nodepkg.ThisHost(), n.Status.NodeInfo
	if !regexp.MustCompile(w.runtime).MatchString(info.ContainerRuntimeVersion) || info.OSImage != host.OSImage ||
		info.KernelVersion != host.KernelVersion || info.MachineID != host.MachineID || info.BootID != host.BootID || info.SystemUUID != host.SystemUUID {
		t.Errorf("node %s says runtime %q, OS image %q, kernel %q, machine %q, boot %q, system %q; want runtime %s on %+v",
			node, info.ContainerRuntimeVersion, info.OSImage, info.KernelVersion, info.MachineID, info.BootID, info.SystemUUID, w.runtime, host)
	}
	h := hintsOf(t, lab.Out.String())
	want := []string{w.web, "labs/18-mykubelet/crash.yaml", "labs/18-mykubelet/stubborn.yaml"}
	if !slices.Equal(h.apply, want) || h.static != "labs/18-mykubelet/static-clock.yaml" {
		t.Fatalf("the lab told the learner to apply %q and copy %q; want %q and static-clock.yaml", h.apply, h.static, want)
	}

	// The web pod: Running, Ready (its readiness probe passed), a pod IP.
	web := create(t, admin, manifest(t, local(t, h.apply[0]), ns, node))
	web = waitPod(t, admin, ns, web.Name, "Ready", ready)
	if web.Status.Phase != v1.PodRunning || web.Status.PodIP == "" || web.Status.HostIP != "127.0.0.1" {
		t.Errorf("web: phase %s, podIP %q, hostIP %q; want Running with a pod IP on 127.0.0.1", web.Status.Phase, web.Status.PodIP, web.Status.HostIP)
	}
	t.Logf("web Ready %s after its creation, pod IP %s", readySince(web), web.Status.PodIP)

	// kubectl through the apiserver into our node server.
	if out, errOut, code := testenv.Kubectl(t, "", "-n", ns, "logs", "web"); code != 0 || !strings.Contains(out, w.log) {
		t.Errorf("kubectl logs web: %q, exit %d, %q; want %q", out, code, errOut, w.log)
	}
	if out, errOut, code := testenv.Kubectl(t, "", "-n", ns, "exec", "web", "--", "hostname"); code != 0 || out != "web\n" {
		t.Errorf("kubectl exec web -- hostname: %q, exit %d, %q", out, code, errOut)
	}
	if got := testenv.PortForwardGet(t, ns, "pod/web", "8080", "/"); !strings.Contains(got, w.page) {
		t.Errorf("GET / through kubectl port-forward: %q, want %q", got, w.page)
	}

	// A crash loop: the reason shows while the back-off waits, and the
	// restarts go on.
	crash := create(t, admin, manifest(t, local(t, h.apply[1]), ns, node))
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
	stubborn := create(t, admin, manifest(t, local(t, h.apply[2]), ns, node))
	waitPod(t, admin, ns, stubborn.Name, "Running and Ready", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning && ready(p) })
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
	b, err := os.ReadFile(local(t, h.static))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lab.L.static, "clock.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	mirror := waitPod(t, admin, metav1.NamespaceDefault, "clock-"+node, "Running and Ready (mirror pod)", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning && ready(p) })
	if _, ok := mirror.Annotations["kubernetes.io/config.mirror"]; !ok {
		t.Errorf("clock-%s has no config.mirror annotation: %v", node, mirror.Annotations)
	}
	if err := os.Remove(filepath.Join(lab.L.static, "clock.yaml")); err != nil {
		t.Fatal(err)
	}
	testenv.PollTrue(t, "mirror pod clock-"+node+" gone after its manifest was removed", time.Minute, func() bool {
		_, err := admin.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, "clock-"+node, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})

	// Ctrl-C: a graceful node shutdown, every pod Failed/Terminated.
	lab.Stop()
	for _, name := range []string{"web", "crash"} {
		p, err := admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Status.Phase != v1.PodFailed || p.Status.Reason != mykubelet.ShutdownReason {
			t.Errorf("%s after Ctrl-C: phase %s reason %q, want Failed %q", name, p.Status.Phase, p.Status.Reason, mykubelet.ShutdownReason)
		}
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
	base := options{kubeconfig: cp.AdminKubeconfig(), nodeName: "t18-bad", runtime: labruntime.Flags{Kind: labruntime.Mock}, address: "127.0.0.1",
		relist: time.Second, backOffInit: time.Second, backOffMax: time.Second, timeout: 30 * time.Second}
	for _, tc := range []struct {
		name string
		set  func(o *options)
		want string
	}{
		{"no cluster", func(o *options) { o.kubeconfig = filepath.Join(t.TempDir(), "nothing.kubeconfig") }, "kubeconfig"},
		{"no runtime", func(o *options) {
			o.runtime = labruntime.Flags{Kind: labruntime.Containerd, Endpoint: "unix://" + filepath.Join(t.TempDir(), "containerd.sock")}
		}, "containerd-up.sh"},
		{"unknown runtime", func(o *options) { o.runtime.Kind = "docker" }, "containerd-2.2"},
		{"port in use", func(o *options) { o.port = busyPort }, "already in use"},
		{"bad node name", func(o *options) { o.nodeName = "Not_A_Name" }, "not a valid Node name"},
		{"bad address", func(o *options) { o.address = "localhost" }, `--address "localhost" is not an IP address`},
		{"bad log size", func(o *options) { o.logMaxSize = "ten" }, "--container-log-max-size"},
		{"one log file", func(o *options) { o.logMaxFiles = 1 }, "--container-log-max-files must be at least 2"},
		{"bad view address", func(o *options) { o.view = "localhost" }, `--view "localhost": want host:port`},
		{"view port in use", func(o *options) { o.view = fmt.Sprintf("127.0.0.1:%d", busyPort) }, "live view: listen tcp 127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(state.EnvVar, t.TempDir())
			o := base
			tc.set(&o)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := run(ctx, o, labenv.NewPrinter(io.Discard), func(*nodeLab) { t.Error("the node came up") })
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
