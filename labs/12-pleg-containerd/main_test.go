package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"

	"kubelet-labs/internal/critest"
	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labnode"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/cri"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// startLab runs the lab in-process on rt as node name, its state in stateDir.
func startLab(t *testing.T, rt critest.Runtime, name, stateDir string) *testenv.Lab[*labnode.Node] {
	t.Helper()
	cp := testenv.ControlPlane(t)
	t.Setenv(state.EnvVar, stateDir)
	o := labnode.Defaults("12-pleg-containerd", name)
	o.Kubeconfig, o.Timeout, o.Kubelet.GCPeriod = cp.AdminKubeconfig(), time.Minute, 2*time.Second
	o.Runtime = labruntime.Flags{Kind: labruntime.Containerd, Endpoint: rt.Endpoint, PodLogsDir: stateDir + "/pod-logs"}
	o.Kubelet.BackOffInitial, o.Kubelet.BackOffMax = time.Second, 4*time.Second
	return testenv.StartLab(t, func(ctx context.Context, out io.Writer, onReady func(*labnode.Node)) error {
		return run(ctx, o, labenv.NewPrinter(out), onReady)
	})
}

func busybox(ns, name, node, image, script string) *v1.Pod {
	grace := int64(5)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.PodSpec{
			NodeName: node, TerminationGracePeriodSeconds: &grace, RestartPolicy: v1.RestartPolicyAlways,
			Containers: []v1.Container{{
				Name: "app", Image: image, ImagePullPolicy: v1.PullIfNotPresent,
				Command: []string{"sh", "-c", script},
				Env: []v1.EnvVar{
					{Name: "GREETING", Value: "hi"},
					{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
				},
			}},
		},
	}
}

const forever = `trap 'exit 0' TERM; echo "$GREETING from $POD_IP"; while true; do sleep 1; done`

func getPod(c kubernetes.Interface, ns, name string) (*v1.Pod, error) {
	return c.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
}

// runningWithIP: what kubectl get pod -o wide shows once the node reported.
func runningWithIP(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodRunning && p.Status.PodIP != "" && len(p.Status.ContainerStatuses) == 1 &&
		p.Status.ContainerStatuses[0].State.Running != nil && p.Status.ContainerStatuses[0].Ready
}

// containersOf lists the runtime's containers of a pod UID.
func containersOf(t *testing.T, c *cri.Client, uid string) []*runtimeapi.Container {
	t.Helper()
	resp, err := c.Runtime.ListContainers(c.Context(context.Background()), &runtimeapi.ContainerFilter{LabelSelector: map[string]string{kubetypes.KubernetesPodUIDLabel: uid}})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func pidOf(t *testing.T, c *cri.Client, id string) int {
	t.Helper()
	resp, err := c.Runtime.ContainerStatus(c.Context(context.Background()), id, true)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscanf(strings.SplitN(strings.SplitN(resp.Info["info"], `"pid":`, 2)[1], ",", 2)[0], "%d", &pid); err != nil || pid <= 0 {
		t.Fatalf("no pid in the verbose status of %s: %v", id, err)
	}
	return pid
}

// realRuntimes are the containerd flavours under test (critest.Cases
// without the mock: this lab runs real containers).
func realRuntimes(t *testing.T, test func(t *testing.T, rt critest.Runtime, flavour string)) {
	for _, rc := range critest.Cases() {
		if rc.Name == "fakecri" {
			continue
		}
		t.Run(rc.Name, func(t *testing.T) {
			rt := rc.Setup(t)
			test(t, rt, strings.ReplaceAll(rc.Name, ".", ""))
		})
	}
}

// The whole life of a pod, as the README shows it: apply → Running with its
// IP; killed from outside → ContainerDied → restarted; deleted → stopped and
// the object removed by our status manager.
func TestPodLifeOnContainerd(t *testing.T) { realRuntimes(t, podLife) }

func podLife(t *testing.T, rt critest.Runtime, flavour string) {
	node := "lab-node-12-" + flavour
	testenv.NoLeaks(t)
	c := critest.Dial(t, rt)
	admin := testenv.AdminClient(t)
	ns := testenv.Namespace(t, admin, "lab12")
	critest.RemoveNamespaceAtEnd(t, c, ns)
	r := startLab(t, rt, node, t.TempDir())

	// apply → Running with a pod IP from CNI
	created := time.Now()
	if _, err := admin.CoreV1().Pods(ns).Create(context.Background(), busybox(ns, "busybox", node, rt.BusyboxImage, forever), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pod *v1.Pod
	testenv.Poll(t, "pod Running with an IP", time.Minute, func() (bool, error) {
		p, err := getPod(admin, ns, "busybox")
		pod = p
		return err == nil && runningWithIP(p), nil
	})
	t.Logf("create → Running with IP %s: %s", pod.Status.PodIP, time.Since(created).Round(time.Millisecond))
	if pod.Status.HostIP == "" || !hasCondition(pod, v1.PodReady) {
		t.Errorf("want hostIP and Ready=True, got hostIP %q conditions %+v", pod.Status.HostIP, pod.Status.Conditions)
	}
	ctrs := containersOf(t, c, string(pod.UID))
	if len(ctrs) != 1 || ctrs[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("want 1 running container in the runtime, got %v", ctrs)
	}
	if got := ctrs[0].Annotations["io.kubernetes.container.restartCount"]; got != "0" {
		t.Errorf("restartCount annotation %q, want 0", got)
	}
	// the container's env saw the pod IP: its log says so
	testenv.Poll(t, "the greeting in the container's log", 30*time.Second, func() (bool, error) {
		log, err := c.ContainerLog(context.Background(), ctrs[0].Id)
		if err != nil {
			return false, nil
		}
		for _, l := range log {
			if strings.Contains(l.Text, "hi from "+pod.Status.PodIP) {
				return true, nil
			}
		}
		return false, nil
	})

	// killed from outside → PLEG ContainerDied → the worker restarts it
	killed := time.Now()
	if err := syscall.Kill(pidOf(t, c, ctrs[0].Id), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testenv.Poll(t, "restartCount 1 and Running again", time.Minute, func() (bool, error) {
		p, err := getPod(admin, ns, "busybox")
		if err != nil || len(p.Status.ContainerStatuses) != 1 {
			return false, err
		}
		cs := p.Status.ContainerStatuses[0]
		pod = p
		return cs.RestartCount == 1 && cs.State.Running != nil, nil
	})
	if at, ok := r.Out.First(killed, "ContainerDied", ns+"/busybox"); ok {
		t.Logf("SIGKILL → PLEG ContainerDied seen: %s (relist 1s)", at.Sub(killed).Round(time.Millisecond))
	} else {
		t.Errorf("no ContainerDied line for %s/busybox in the output", ns)
	}
	if lt := pod.Status.ContainerStatuses[0].LastTerminationState.Terminated; lt == nil || lt.ExitCode != 137 {
		t.Errorf("lastState %+v, want terminated with exit code 137", pod.Status.ContainerStatuses[0].LastTerminationState)
	}

	// delete → SyncTerminatingPod stops it → the status manager deletes the object
	deleted := time.Now()
	if err := admin.CoreV1().Pods(ns).Delete(context.Background(), "busybox", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Poll(t, "the pod object gone", time.Minute, func() (bool, error) {
		_, err := getPod(admin, ns, "busybox")
		return apierrors.IsNotFound(err), nil
	})
	t.Logf("delete → pod object gone: %s", time.Since(deleted).Round(time.Millisecond))
	for _, ct := range containersOf(t, c, string(pod.UID)) {
		if ct.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("container %s still running after the pod was deleted", ct.Id)
		}
	}
	sbs, err := c.Pods(context.Background(), map[string]string{kubetypes.KubernetesPodUIDLabel: string(pod.UID)})
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range sbs {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			t.Errorf("sandbox %s still ready after the pod was deleted", sb.Id)
		}
	}
	// the garbage collector (every 2 s here, 1 min in a kubelet) removes
	// the dead containers and the sandbox of the pod that is gone
	// — and then says so: the runtime can be empty a moment before the
	// line is printed, so the poll waits for both.
	testenv.Poll(t, "the pod's containers and sandbox removed by the GC", time.Minute, func() (bool, error) {
		sbs, err := c.Pods(context.Background(), map[string]string{kubetypes.KubernetesPodUIDLabel: string(pod.UID)})
		return err == nil && len(sbs) == 0 && len(containersOf(t, c, string(pod.UID))) == 0 &&
			strings.Contains(r.Out.String(), "gc      removed"), err
	})
	out := r.Out.String()
	for _, want := range []string{"SyncTerminatingPod", "SyncTerminatedPod", "ContainerStarted", "gc      removed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func hasCondition(p *v1.Pod, t v1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t && c.Status == v1.ConditionTrue {
			return true
		}
	}
	return false
}

// A pod whose object is gone while the node was down: its containers run
// with no pod left. The next run finds them through the PLEG and the
// workers drive them to terminating as a runtime-only pod.
func TestOrphanedContainersAreStopped(t *testing.T) { realRuntimes(t, orphans) }

func orphans(t *testing.T, rt critest.Runtime, flavour string) {
	node := "lab-node-12o-" + flavour
	testenv.NoLeaks(t)
	c := critest.Dial(t, rt)
	admin := testenv.AdminClient(t)
	ns := testenv.Namespace(t, admin, "lab12")
	critest.RemoveNamespaceAtEnd(t, c, ns)
	dir := t.TempDir()
	r := startLab(t, rt, node, dir)
	if _, err := admin.CoreV1().Pods(ns).Create(context.Background(), busybox(ns, "orphan", node, rt.BusyboxImage, forever), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pod *v1.Pod
	testenv.Poll(t, "pod Running", time.Minute, func() (bool, error) {
		p, err := getPod(admin, ns, "orphan")
		pod = p
		return err == nil && runningWithIP(p), nil
	})
	r.Stop() // the node goes down; its containers keep running
	zero := int64(0)
	if err := admin.CoreV1().Pods(ns).Delete(context.Background(), "orphan", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if n := len(containersOf(t, c, string(pod.UID))); n != 1 {
		t.Fatalf("want the container still there while the node is down, got %d", n)
	}
	r2 := startLab(t, rt, node, dir)
	testenv.Poll(t, "the orphan's container and sandbox stopped", time.Minute, func() (bool, error) {
		for _, ct := range containersOf(t, c, string(pod.UID)) {
			if ct.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return false, nil
			}
		}
		sbs, err := c.Pods(context.Background(), map[string]string{kubetypes.KubernetesPodUIDLabel: string(pod.UID)})
		for _, sb := range sbs {
			if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				return false, err
			}
		}
		return true, err
	})
	if !strings.Contains(r2.Out.String(), "SyncTerminatingRuntimePod") {
		t.Errorf("output lacks SyncTerminatingRuntimePod:\n%s", r2.Out)
	}
}

// Pod startup latency through our workers on containerd, the number the
// kubelet's SLO speaks of (p99 ≤ 5 s): logged, not asserted.
func TestStartupLatency(t *testing.T) { realRuntimes(t, startupLatency) }

func startupLatency(t *testing.T, rt critest.Runtime, flavour string) {
	node := "lab-node-12s-" + flavour
	testenv.NoLeaks(t)
	c := critest.Dial(t, rt)
	admin := testenv.AdminClient(t)
	ns := testenv.Namespace(t, admin, "lab12")
	critest.RemoveNamespaceAtEnd(t, c, ns)
	startLab(t, rt, node, t.TempDir())
	const n = 20
	created := map[string]time.Time{}
	for i := range n {
		name := fmt.Sprintf("p%02d", i)
		created[name] = time.Now()
		if _, err := admin.CoreV1().Pods(ns).Create(context.Background(), busybox(ns, name, node, rt.BusyboxImage, forever), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var lat []time.Duration
	seen := map[string]bool{}
	testenv.Poll(t, "all pods Running", 2*time.Minute, func() (bool, error) {
		list, err := admin.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for i := range list.Items {
			p := &list.Items[i]
			if !seen[p.Name] && runningWithIP(p) {
				seen[p.Name] = true
				lat = append(lat, time.Since(created[p.Name]))
			}
		}
		return len(seen) == n, nil
	})
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("%s: %d pods create → Running (seen by a 50 ms poll): p50 %s, p99 %s (SLO p99 ≤ 5s)", rt.Name, n,
		lat[n/2].Round(time.Millisecond), lat[n*99/100].Round(time.Millisecond))
	if err := admin.CoreV1().Pods(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	testenv.Poll(t, "all pods gone", 2*time.Minute, func() (bool, error) {
		list, err := admin.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		return err == nil && len(list.Items) == 0, err
	})
	t.Logf("%s: %d pods delete → gone: %s", rt.Name, n, time.Since(start).Round(time.Millisecond))
}

// Without a runtime the lab fails before it joins, and says how to start one.
func TestNoRuntime(t *testing.T) {
	t.Setenv(state.EnvVar, t.TempDir())
	o := labnode.Defaults("12-pleg-containerd", "lab-node-12x")
	o.Runtime = labruntime.Flags{Kind: labruntime.Containerd, Endpoint: "unix://" + t.TempDir() + "/none.sock"}
	err := run(context.Background(), o, labenv.NewPrinter(io.Discard), nil)
	if err == nil || !strings.Contains(err.Error(), labruntime.UpHint) {
		t.Fatalf("want an error naming %q, got %v", labruntime.UpHint, err)
	}
}
