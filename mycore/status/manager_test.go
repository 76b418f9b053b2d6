package status

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"kubelet-labs/internal/testenv"
)

const testNode = "status-test-node"

// counter counts the requests the manager sends, by verb, and can run a
// hook once right after a GET of a pod (to change the world between the
// manager's read and its write).
type counter struct {
	rt       http.RoundTripper
	mu       sync.Mutex
	n        map[string]int
	afterGet func()
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(r)
	c.mu.Lock()
	c.n[r.Method]++
	hook := c.afterGet
	if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/pods/") {
		c.afterGet = nil
	} else {
		hook = nil
	}
	c.mu.Unlock()
	if hook != nil {
		hook()
	}
	return resp, err
}

func (c *counter) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[method]
}

// safety is a DeletionSafety the test flips.
type safety struct{ running atomic.Bool }

func (s *safety) CouldHaveRunningContainers(types.UID) bool { return s.running.Load() }

// logs collects the manager's lines.
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) logf(f string, a ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(f, a...))
}

func (l *logs) contain(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

type fixture struct {
	admin  kubernetes.Interface
	calls  *counter
	safety *safety
	logs   *logs
	m      *Manager
}

// setup makes a manager whose client counts its calls. The manager
// writes as admin here; the Node authorizer path is lab 13's test.
func setup(t *testing.T) *fixture {
	t.Helper()
	admin := testenv.AdminClient(t)
	cfg := rest.CopyConfig(testenv.AdminConfig(t))
	calls := &counter{n: map[string]int{}}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { calls.rt = rt; return calls })
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ensureNode(t, admin)
	f := &fixture{admin: admin, calls: calls, safety: &safety{}, logs: &logs{}}
	f.m = NewManager(client, f.safety, Options{Log: f.logs.logf})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("manager log:\n%s", f.logs)
		}
	})
	return f
}

// ensureNode registers the node the test pods are bound to: a pod bound
// to a node that does not exist is deleted by the pod garbage collector.
func ensureNode(t *testing.T, c kubernetes.Interface) {
	t.Helper()
	_, err := c.CoreV1().Nodes().Create(context.Background(), &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// createPod creates a pod bound to the test node (the apiserver admits
// it once the namespace's default service account exists).
func createPod(t *testing.T, c kubernetes.Interface, name string, policy v1.RestartPolicy) *v1.Pod {
	t.Helper()
	f := false
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.PodSpec{NodeName: testNode, RestartPolicy: policy, AutomountServiceAccountToken: &f,
			Containers: []v1.Container{{Name: "main", Image: "busybox"}}},
	}
	testenv.WaitDefaultServiceAccount(t, c)
	got, err := c.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = c.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	return got
}

func getPod(t *testing.T, c kubernetes.Interface, name string) *v1.Pod {
	t.Helper()
	p, err := c.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func runningAt(started time.Time) v1.PodStatus {
	return v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{
		Name: "main", Image: "busybox", ContainerID: "virtual://c1", Ready: true,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}},
	}}, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.Now()}}}
}

func exitedWith(code int32, reason string) v1.PodStatus {
	phase := v1.PodSucceeded
	if code != 0 {
		phase = v1.PodFailed
	}
	return v1.PodStatus{Phase: phase, ContainerStatuses: []v1.ContainerStatus{{
		Name: "main", Image: "busybox", ContainerID: "virtual://c1",
		State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code, Reason: reason}},
	}}}
}

func TestPostsOnlyChanges(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	pod := createPod(t, f.admin, "only-changes", v1.RestartPolicyNever)

	f.m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodPending})
	if n := f.m.Sync(ctx, false); n != 1 {
		t.Fatalf("first status: synced %d pods, want 1", n)
	}
	if got := getPod(t, f.admin, pod.Name).Status; got.Phase != v1.PodPending || got.StartTime == nil {
		t.Fatalf("apiserver status after the first post: phase %q startTime %v", got.Phase, got.StartTime)
	}
	patches := f.calls.count(http.MethodPatch)
	if patches != 1 {
		t.Fatalf("%d PATCH calls for one change, want 1", patches)
	}

	// The same status again, and again with a new condition timestamp:
	// no new version, no call at all.
	started := time.Now().Add(-time.Second)
	f.m.SetPodStatus(pod, runningAt(started))
	f.m.Sync(ctx, false)
	patches = f.calls.count(http.MethodPatch)
	gets := f.calls.count(http.MethodGet)
	time.Sleep(1100 * time.Millisecond) // a new second: LastTransitionTime would differ
	for range 3 {
		f.m.SetPodStatus(pod, runningAt(started))
	}
	if n := f.m.Sync(ctx, false); n != 0 {
		t.Errorf("an unchanged status was synced (%d pods)", n)
	}
	if n := f.m.Sync(ctx, true); n != 0 {
		t.Errorf("the periodic sync synced %d pods that the apiserver has in their latest version", n)
	}
	if p, g := f.calls.count(http.MethodPatch), f.calls.count(http.MethodGet); p != patches || g != gets {
		t.Errorf("unchanged status: PATCH %d→%d, GET %d→%d; want no calls", patches, p, gets, g)
	}

	// A change is posted once.
	f.m.SetPodStatus(pod, exitedWith(0, "Completed"))
	f.m.Sync(ctx, false)
	if p := f.calls.count(http.MethodPatch); p != patches+1 {
		t.Errorf("one change: %d PATCH calls, want 1", p-patches)
	}
	got := getPod(t, f.admin, pod.Name).Status
	if got.Phase != v1.PodSucceeded || got.ContainerStatuses[0].State.Terminated == nil {
		t.Errorf("apiserver status: %s", Describe(got))
	}
	t.Logf("calls: %d GET, %d PATCH for 3 changes and 4 repeats", f.calls.count(http.MethodGet), f.calls.count(http.MethodPatch))
}

func TestTerminalPhaseKept(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	pod := createPod(t, f.admin, "terminal-kept", v1.RestartPolicyNever)
	f.m.SetPodStatus(pod, exitedWith(3, "Error"))
	f.m.Sync(ctx, false)

	// A terminated container of a Never pod cannot run again, and a
	// Failed pod cannot become Running: both refused before any write.
	f.m.SetPodStatus(pod, runningAt(time.Now()))
	if n := f.m.Sync(ctx, false); n != 0 {
		t.Errorf("a status reviving a finished container was synced")
	}
	if !f.logs.contain("illegal transition to non-terminated state") {
		t.Errorf("no log line says why the status was refused")
	}
	f.m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodRunning})
	if !f.logs.contain("phase Failed is terminal, Running refused") {
		t.Errorf("no log line says the phase change was refused")
	}
	if st, _ := f.m.GetPodStatus(pod.UID); st.Phase != v1.PodFailed {
		t.Errorf("cached phase %s, want Failed", st.Phase)
	}
	if got := getPod(t, f.admin, pod.Name).Status; got.Phase != v1.PodFailed || got.ContainerStatuses[0].State.Terminated.ExitCode != 3 {
		t.Errorf("apiserver: %s", Describe(got))
	}
}

func TestTerminatePodMarksContainersUnknown(t *testing.T) {
	f := setup(t)
	pod := createPod(t, f.admin, "terminate", v1.RestartPolicyAlways)
	f.m.SetPodStatus(pod, runningAt(time.Now()))
	f.m.TerminatePod(pod)
	f.m.Sync(context.Background(), false)
	got := getPod(t, f.admin, pod.Name).Status
	term := got.ContainerStatuses[0].State.Terminated
	if got.Phase != v1.PodFailed || term == nil || term.ExitCode != 137 || term.Reason != kubecontainer.ContainerReasonStatusUnknown {
		t.Errorf("after TerminatePod the apiserver shows %s %+v; want Failed, exit 137 ContainerStatusUnknown", Describe(got), term)
	}
}

func TestPodRecreatedUnderTheSameName(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	old := createPod(t, f.admin, "recreated", v1.RestartPolicyNever)
	f.m.SetPodStatus(old, v1.PodStatus{Phase: v1.PodPending})
	f.m.Sync(ctx, false)
	f.m.SetPodStatus(old, runningAt(time.Now()))

	// Between the manager's GET and its PATCH, the pod is deleted and a
	// new one takes its name: the PATCH carries the old UID and must be
	// refused, leaving the new pod alone.
	var fresh *v1.Pod
	f.calls.mu.Lock()
	f.calls.afterGet = func() {
		if err := f.admin.CoreV1().Pods("default").Delete(ctx, old.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Errorf("delete: %v", err)
		}
		testenv.PollTrue(t, "the old pod gone", time.Minute, func() bool {
			_, err := f.admin.CoreV1().Pods("default").Get(ctx, old.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
		fresh = createPod(t, f.admin, old.Name, v1.RestartPolicyNever)
	}
	f.calls.mu.Unlock()
	f.m.Sync(ctx, false)
	if fresh == nil {
		t.Fatal("the hook did not run")
	}
	if !f.logs.contain("patch failed") {
		t.Errorf("the PATCH with the old UID was not refused")
	}
	if got := getPod(t, f.admin, old.Name); got.UID != fresh.UID || got.Status.Phase != v1.PodPending || len(got.Status.ContainerStatuses) != 0 {
		t.Errorf("the new pod was written to: uid %s, %s", got.UID, Describe(got.Status))
	}

	// The next sync reads the new UID and drops the old status unwritten.
	patches := f.calls.count(http.MethodPatch)
	f.m.Sync(ctx, true)
	if f.calls.count(http.MethodPatch) != patches {
		t.Errorf("a status was patched onto the new pod")
	}
	if !f.logs.contain("the name now belongs to another pod") {
		t.Errorf("no log line says the name belongs to another pod")
	}
	if _, ok := f.m.GetPodStatus(old.UID); ok {
		t.Errorf("the old pod's status is still cached")
	}
}

func TestFinalDeleteOnlyWhenSafe(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	pod := createPod(t, f.admin, "final-delete", v1.RestartPolicyNever)
	f.m.SetPodStatus(pod, runningAt(time.Now()))
	f.m.Sync(ctx, false)

	// kubectl delete: the pod is bound to a node, so the apiserver only
	// sets deletionTimestamp and waits for the kubelet.
	if err := f.admin.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleting := getPod(t, f.admin, pod.Name)
	if deleting.DeletionTimestamp == nil {
		t.Fatal("no deletionTimestamp")
	}

	// Containers still stopping: the terminal phase is held back and the
	// pod stays, however often the manager is asked.
	f.safety.running.Store(true)
	f.m.SetPodStatus(deleting, exitedWith(0, "Completed"))
	f.m.TerminatePod(deleting)
	f.m.Sync(ctx, false)
	f.m.Sync(ctx, true)
	if got := getPod(t, f.admin, pod.Name); got.Status.Phase != v1.PodRunning {
		t.Errorf("phase %s posted while containers could run; want Running kept", got.Status.Phase)
	}
	if f.calls.count(http.MethodDelete) != 0 {
		t.Fatalf("deleted while containers could still run")
	}
	if !f.logs.contain("phase Succeeded held back while its containers could still run") {
		t.Errorf("no log line says the phase was held back")
	}

	// Stopped: the periodic sync posts Succeeded, then deletes, once.
	f.safety.running.Store(false)
	f.m.Sync(ctx, true)
	if _, err := f.admin.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod still there after the final delete: %v", err)
	}
	if n := f.calls.count(http.MethodDelete); n != 1 {
		t.Errorf("%d DELETE calls, want 1", n)
	}
	if _, ok := f.m.GetPodStatus(pod.UID); ok {
		t.Errorf("status still cached after the delete")
	}
}

func TestFinishedPodNotDeletedWithoutDeletion(t *testing.T) {
	f := setup(t)
	pod := createPod(t, f.admin, "completed", v1.RestartPolicyNever)
	f.m.SetPodStatus(pod, exitedWith(0, "Completed"))
	f.m.TerminatePod(pod)
	f.m.Sync(context.Background(), false)
	f.m.Sync(context.Background(), true)
	if got := getPod(t, f.admin, pod.Name); got.Status.Phase != v1.PodSucceeded {
		t.Errorf("phase %s, want Succeeded", got.Status.Phase)
	}
	if f.calls.count(http.MethodDelete) != 0 {
		t.Errorf("a completed pod nobody deleted was deleted")
	}
}

func TestRemoveOrphanedStatuses(t *testing.T) {
	m := NewManager(nil, &safety{}, Options{})
	a, b := specPod(v1.RestartPolicyNever, "main"), specPod(v1.RestartPolicyNever, "main")
	b.UID = "uid-2"
	m.SetPodStatus(a, v1.PodStatus{Phase: v1.PodPending})
	m.SetPodStatus(b, v1.PodStatus{Phase: v1.PodPending})
	m.RemoveOrphanedStatuses(map[types.UID]bool{b.UID: true})
	if _, ok := m.GetPodStatus(a.UID); ok {
		t.Errorf("orphan kept")
	}
	if _, ok := m.GetPodStatus(b.UID); !ok {
		t.Errorf("wanted pod forgotten")
	}
}

func TestRunPostsAndStops(t *testing.T) {
	f := setup(t)
	pod := createPod(t, f.admin, "run", v1.RestartPolicyNever)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.m.Run(ctx) }()
	start := time.Now()
	f.m.SetPodStatus(pod, runningAt(time.Now()))
	testenv.PollTrue(t, "Running in the apiserver", time.Minute, func() bool { return getPod(t, f.admin, pod.Name).Status.Phase == v1.PodRunning })
	t.Logf("SetPodStatus → phase visible in the apiserver: %s", time.Since(start).Round(time.Millisecond))
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
}
