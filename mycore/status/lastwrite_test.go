package status

import (
	"context"
	"net/http"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	kubepod "k8s.io/kubernetes/pkg/kubelet/pod"
)

// TestReadLastWrite: with Options.ReadLastWrite a post is one PATCH, no
// GET, and still loses nothing. The status goes Ready → not ready → Ready
// → not ready while the pod handed to the manager is a copy from the
// second step (as the pod manager may hold one, its update not delivered
// yet): a patch computed from that copy would leave the last step out, it
// shows "not ready" already. Another writer adds a condition of its own
// between two posts: a patch from our last write must not remove it.
// A deletion that came after the last write is taken from the pod handed
// over (the informer delivered it), and the final delete follows: no GET
// from the first post to the last delete.
func TestReadLastWrite(t *testing.T) {
	f := setup(t)
	f.m.o.ReadLastWrite = true
	ctx := context.Background()
	pod := createPod(t, f.admin, "last-write", v1.RestartPolicyNever)
	started := time.Now().Add(-time.Second)
	ready := func(ok bool) v1.PodStatus {
		st := runningAt(started)
		st.ContainerStatuses[0].Ready = ok
		if !ok {
			st.Conditions[0].Status = v1.ConditionFalse
		}
		return st
	}
	readyIn := func(st v1.PodStatus) (ready v1.ConditionStatus, gate bool) {
		for _, c := range st.Conditions {
			switch c.Type {
			case v1.PodReady:
				ready = c.Status
			case "example.com/gate":
				gate = c.Status == v1.ConditionTrue
			}
		}
		return ready, gate
	}
	step := func(what string, st v1.PodStatus, wantReady v1.ConditionStatus, wantGate bool) {
		t.Helper()
		f.m.SetPodStatus(pod, st)
		if n := f.m.Sync(ctx, false); n != 1 {
			t.Fatalf("%s: synced %d pods, want 1", what, n)
		}
		got := getPod(t, f.admin, pod.Name).Status
		if r, g := readyIn(got); r != wantReady || g != wantGate || got.Phase != v1.PodRunning {
			t.Errorf("%s: the apiserver has phase %s, Ready %s, the other writer's condition %v; want Running, %s, %v", what, got.Phase, r, g, wantReady, wantGate)
		}
	}
	step("ready", ready(true), v1.ConditionTrue, false)
	step("not ready", ready(false), v1.ConditionFalse, false)
	pod = getPod(t, f.admin, pod.Name) // the copy that will be stale
	gets := f.calls.count(http.MethodGet)
	// Another writer (a readiness gate's controller) adds a condition.
	patch := []byte(`{"status":{"conditions":[{"type":"example.com/gate","status":"True"}]}}`)
	if _, err := f.admin.CoreV1().Pods("default").Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	step("ready again", ready(true), v1.ConditionTrue, true)
	step("not ready again", ready(false), v1.ConditionFalse, true)
	if g, p := f.calls.count(http.MethodGet)-gets, f.calls.count(http.MethodPatch); g != 0 || p != 4 {
		t.Errorf("four posts made %d GET and %d PATCH calls; want 0 and 4", g, p)
	}

	// kubectl delete after our last write: the copy shows no deletion, the
	// pod handed over does: post the end, delete it.
	if err := f.admin.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleting := getPod(t, f.admin, pod.Name)
	f.m.SetPodStatus(deleting, exitedWith(0, "Completed"))
	f.m.TerminatePod(deleting)
	f.m.Sync(ctx, false)
	f.m.Sync(ctx, true)
	if _, err := f.admin.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod still there after the final delete: %v", err)
	}
	if g, d := f.calls.count(http.MethodGet)-gets, f.calls.count(http.MethodDelete); g != 0 || d != 1 {
		t.Errorf("the end made %d GET and %d DELETE calls; want 0 and 1", g, d)
	}
}

// TestReadLastWriteForgetsWhatTheInformerHas: the reply to a post is kept
// only until the pod manager has that write (its pod carries the reply's
// resourceVersion): then the next post patches from the pod manager's
// copy — still no GET, and nothing lost — and a fleet does not hold a
// second copy of every running pod's status.
func TestReadLastWriteForgetsWhatTheInformerHas(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	pm := kubepod.NewBasicPodManager()
	f.m = NewManager(f.m.client, f.safety, Options{Log: f.logs.logf, Pods: pm, ReadLastWrite: true})
	pod := createPod(t, f.admin, "caught-up", v1.RestartPolicyNever)
	pm.AddPod(pod)
	started := time.Now().Add(-time.Second)
	gets := f.calls.count(http.MethodGet)

	running := runningAt(started)
	running.QOSClass = v1.PodQOSBestEffort // as the apiserver has it: nothing to reconcile
	f.m.SetPodStatus(pod, running)
	if n := f.m.Sync(ctx, false); n != 1 {
		t.Fatalf("synced %d pods, want 1", n)
	}
	if len(f.m.lastWrite) != 1 {
		t.Fatalf("kept %d last writes after a post; want 1", len(f.m.lastWrite))
	}
	// The pod manager still has the pod from before our write (Pending):
	// that is our own older status, not someone else's — nothing to
	// reconcile, nothing to forget.
	f.m.Sync(ctx, true)
	if p := f.calls.count(http.MethodPatch); p != 1 || len(f.m.lastWrite) != 1 {
		t.Fatalf("a pass before the informer delivered our write: %d PATCH in all, %d last writes kept; want 1 and 1", p, len(f.m.lastWrite))
	}
	pm.UpdatePod(getPod(t, f.admin, pod.Name)) // the informer delivers our write
	f.m.Sync(ctx, true)
	if len(f.m.lastWrite) != 0 {
		t.Fatalf("kept %d last writes after the informer delivered ours; want 0", len(f.m.lastWrite))
	}

	notReady := *running.DeepCopy()
	notReady.ContainerStatuses[0].Ready = false
	notReady.Conditions[0].Status = v1.ConditionFalse
	f.m.SetPodStatus(pod, notReady) // handed over with the pod from before any write
	f.m.Sync(ctx, false)
	got := getPod(t, f.admin, pod.Name).Status
	if got.Phase != v1.PodRunning || got.ContainerStatuses[0].Ready || !podReadyIs(got, v1.ConditionFalse) {
		t.Errorf("after the second post the apiserver has phase %s, container ready %v, conditions %v; want Running, not ready", got.Phase, got.ContainerStatuses[0].Ready, got.Conditions)
	}
	if g, p := f.calls.count(http.MethodGet)-gets, f.calls.count(http.MethodPatch); g != 0 || p != 2 {
		t.Errorf("two posts made %d GET and %d PATCH calls; want 0 and 2", g, p)
	}
}

func podReadyIs(st v1.PodStatus, want v1.ConditionStatus) bool {
	for _, c := range st.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == want
		}
	}
	return false
}

// TestAPostThatWaitedForItsTurnSendsTheNewest: with WriteTurns, a post
// queued with one version and made to wait for a turn sends the version
// cached when the turn comes, so a status superseded while it waited is
// never written: one PATCH, and it carries the newer status.
func TestAPostThatWaitedForItsTurnSendsTheNewest(t *testing.T) {
	f := setup(t)
	turns, err := NewWriteTurns(1)
	if err != nil {
		t.Fatal(err)
	}
	f.m.o.Turns = turns
	ctx := context.Background()
	pod := createPod(t, f.admin, "turns", v1.RestartPolicyNever)
	notReady := runningAt(time.Now().Add(-time.Second))
	notReady.ContainerStatuses[0].Ready = false
	notReady.Conditions[0].Status = v1.ConditionFalse
	f.m.SetPodStatus(pod, notReady)

	done, err := turns.take(ctx) // another node's write holds the only turn
	if err != nil {
		t.Fatal(err)
	}
	patches := f.calls.count(http.MethodPatch)
	synced := make(chan int)
	go func() { synced <- f.m.Sync(ctx, false) }()
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		return turns.Waited() == 1, nil
	}); err != nil {
		t.Fatalf("the sync never waited for a turn: %v", err)
	}
	ready := runningAt(time.Now().Add(-time.Second)) // while it waits, the probe says ready
	f.m.SetPodStatus(pod, ready)
	done()
	if n := <-synced; n != 1 {
		t.Fatalf("synced %d pods, want 1", n)
	}
	if p := f.calls.count(http.MethodPatch) - patches; p != 1 {
		t.Errorf("%d PATCH calls, want 1", p)
	}
	got := getPod(t, f.admin, pod.Name).Status
	if !got.ContainerStatuses[0].Ready {
		t.Errorf("the apiserver has the container not ready: the post sent the version it was queued with, not the newest")
	}
	if n := f.m.Sync(ctx, false); n != 0 {
		t.Errorf("a second sync found %d pods to post: the newest version was not recorded as posted", n)
	}
}
