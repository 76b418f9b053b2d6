package podconfig

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/internal/testenv"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(upstreamDirEnv); dir != "" {
		os.Exit(runUpstreamFileSource(dir)) // the child of TestFilesMatchUpstream
	}
	testenv.Main(m)
}

// next returns the next update, failing the test after a generous wait.
func next(t *testing.T, ch <-chan kubetypes.PodUpdate) kubetypes.PodUpdate {
	t.Helper()
	select {
	case u, ok := <-ch:
		if !ok {
			t.Fatal("updates channel closed")
		}
		return u
	case <-time.After(30 * time.Second):
		t.Fatal("no update within 30s")
	}
	return kubetypes.PodUpdate{}
}

// describe is "OP name name ..." for comparing.
func describe(u kubetypes.PodUpdate) string {
	s := OpName(u.Op)
	for _, p := range u.Pods {
		s += " " + p.Name
	}
	return s
}

func expect(t *testing.T, ch <-chan kubetypes.PodUpdate, want string) kubetypes.PodUpdate {
	t.Helper()
	u := next(t, ch)
	if got := describe(u); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if u.Source != kubetypes.ApiserverSource {
		t.Errorf("source %q", u.Source)
	}
	for _, p := range u.Pods {
		if p.Annotations[kubetypes.ConfigSourceAnnotationKey] != kubetypes.ApiserverSource || p.Annotations[kubetypes.ConfigFirstSeenAnnotationKey] == "" {
			t.Errorf("%s annotations %v", p.Name, p.Annotations)
		}
	}
	return u
}

// waitClosed fails unless ch is closed (the source's goroutines are done).
func waitClosed(t *testing.T, ch <-chan kubetypes.PodUpdate) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("updates channel not closed 30s after cancel")
		}
	}
}

func podOn(node, name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
}

// TestWatchOpsAndStop (fake clientset): the initial list is one ADD, each
// later change one op, and after cancel the channel closes with no
// goroutine left.
func TestWatchOpsAndStop(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	a, b := podOn("n1", "a"), podOn("n1", "b")
	client := fake.NewClientset(a, b)
	// The fake has no resourceVersions: changes made between its list and
	// its watch are lost. Make changes only once the watch is open.
	watching := make(chan struct{}, 1)
	client.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		select {
		case watching <- struct{}{}:
		default:
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := Watch(ctx, client, "n1")
	first := next(t, ch)
	if first.Op != kubetypes.ADD || len(first.Pods) != 2 {
		t.Fatalf("first update %s, want one ADD with both pods", describe(first))
	}
	<-watching

	pods := client.CoreV1().Pods("default")
	c := podOn("n1", "c")
	if _, err := pods.Create(ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, ch, "ADD c")

	c.Labels = map[string]string{"v": "2"}
	if _, err := pods.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, ch, "UPDATE c")

	c.Status.Phase = v1.PodRunning
	if _, err := pods.UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, ch, "RECONCILE c")

	// A resync-like write that changes nothing the kubelet looks at.
	c.ResourceVersion = "7"
	if _, err := pods.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	now, grace := metav1.Now(), int64(30)
	c.DeletionTimestamp, c.DeletionGracePeriodSeconds = &now, &grace
	if _, err := pods.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	u := expect(t, ch, "DELETE c") // and nothing for the no-op write before it
	if g := u.Pods[0].DeletionGracePeriodSeconds; g == nil || *g != 30 {
		t.Errorf("grace %v", g)
	}

	if err := pods.Delete(ctx, "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, ch, "REMOVE c")

	// Same name, new UID, seen as one watch update: REMOVE old, ADD new.
	b2 := podOn("n1", "b")
	b2.UID = "ub2"
	if _, err := pods.Update(ctx, b2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if u := expect(t, ch, "REMOVE b"); u.Pods[0].UID != "uid-b" {
		t.Errorf("removed uid %s", u.Pods[0].UID)
	}
	if u := expect(t, ch, "ADD b"); u.Pods[0].UID != "ub2" {
		t.Errorf("added uid %s", u.Pods[0].UID)
	}

	cancel()
	waitClosed(t, ch)
}

// TestWatchEmptyFirstList: a node without pods still gets one empty ADD,
// the kubelet's "this source is ready" signal.
func TestWatchEmptyFirstList(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithCancel(context.Background())
	ch := Watch(ctx, fake.NewClientset(), "n1")
	if u := next(t, ch); u.Op != kubetypes.ADD || len(u.Pods) != 0 {
		t.Errorf("first update %s, want an empty ADD", describe(u))
	}
	cancel()
	waitClosed(t, ch)
}

// TestWatchStopsWithoutReader: a receiver that stops reading does not
// keep the source alive.
func TestWatchStopsWithoutReader(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var objs []runtime.Object
	for i := 0; i < 3*UpdatesBuffer; i++ {
		p := podOn("n1", fmt.Sprintf("p%d", i))
		objs = append(objs, p)
	}
	client := fake.NewClientset(objs...)
	ctx, cancel := context.WithCancel(context.Background())
	ch := Watch(ctx, client, "n1")
	next(t, ch)
	for i := 0; i < 2*UpdatesBuffer; i++ { // fill the buffer and block the sender
		p := podOn("n1", fmt.Sprintf("p%d", i))
		p.Labels = map[string]string{"x": "y"}
		client.CoreV1().Pods("default").Update(ctx, p, metav1.UpdateOptions{})
	}
	cancel()
	waitClosed(t, ch)
}

// TestWatchRealAPIServer: against a real apiserver, with the ops a
// learner produces with kubectl: only this node's pods, a graceful delete
// that leaves the pod Terminating (DELETE), a forced delete (REMOVE), a
// status write (RECONCILE); a new source sees existing pods as one ADD.
func TestWatchRealAPIServer(t *testing.T) {
	admin := testenv.AdminClient(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		// client-go keeps idle keep-alive connections to the apiserver
		// (and their goroutines: two for HTTP/1.1, one for HTTP/2) in its
		// shared transport.
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	testenv.WaitDefaultServiceAccount(t, admin)
	const node = "t-podconfig-node"
	ns := "default"
	pods := admin.CoreV1().Pods(ns)
	before := podOn(node, "t-pc-before")
	before.UID = ""
	if _, err := pods.Create(ctx, before, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { forceDelete(admin.CoreV1().Pods(ns), "t-pc-before", "t-pc-web", "t-pc-other") })

	ch := Watch(ctx, admin, node)
	expect(t, ch, "ADD t-pc-before")

	other := podOn("some-other-node", "t-pc-other")
	other.UID = ""
	if _, err := pods.Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	web := podOn(node, "t-pc-web")
	web.UID = ""
	created, err := pods.Create(ctx, web, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, ch, "ADD t-pc-web") // and nothing for the other node's pod

	created.Status.Conditions = []v1.PodCondition{{Type: "example.com/Seen", Status: v1.ConditionTrue}}
	if _, err := pods.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, ch, "RECONCILE t-pc-web")

	if err := pods.Delete(ctx, "t-pc-web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	u := expect(t, ch, "DELETE t-pc-web")
	if p := u.Pods[0]; p.DeletionTimestamp == nil || p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != 30 {
		t.Errorf("graceful delete: deletionTimestamp %v grace %v, want 30s", p.DeletionTimestamp, p.DeletionGracePeriodSeconds)
	}
	if _, err := pods.Get(ctx, "t-pc-web", metav1.GetOptions{}); err != nil {
		t.Errorf("after a graceful delete with nobody to stop it the pod should stay (Terminating): %v", err)
	}
	zero := int64(0)
	if err := pods.Delete(ctx, "t-pc-web", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	// The apiserver first shortens the grace period of the terminating pod
	// to 0 (a semantic change with a deletionTimestamp: DELETE again), then
	// removes it (REMOVE).
	u = expect(t, ch, "DELETE t-pc-web")
	if g := u.Pods[0].DeletionGracePeriodSeconds; g == nil || *g != 0 {
		t.Errorf("forced delete: grace %v, want 0", g)
	}
	expect(t, ch, "REMOVE t-pc-web")

	// A second source (a restarted kubelet) gets what exists as one ADD.
	ctx2, cancel2 := context.WithCancel(ctx)
	ch2 := Watch(ctx2, admin, node)
	expect(t, ch2, "ADD t-pc-before")
	cancel2()
	waitClosed(t, ch2)

	cancel()
	waitClosed(t, ch)
}

func forceDelete(pods interface {
	Delete(context.Context, string, metav1.DeleteOptions) error
}, names ...string) {
	zero := int64(0)
	for _, n := range names {
		_ = pods.Delete(context.Background(), n, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	}
}

// TestWatchListsAgainAfterLostWatch (fake clientset): when the watch ends
// with "too old" (410 Gone, as after a watcher the apiserver closed), the
// reflector lists again, and what changed meanwhile arrives as podStorage
// would send it for a new SET: REMOVE for the pod no longer listed first,
// then the listed pods that changed or are new — and nothing for the pod
// that did not change.
func TestWatchListsAgainAfterLostWatch(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	a, b, same := podOn("n1", "a"), podOn("n1", "b"), podOn("n1", "same")
	client := fake.NewClientset(a, b, same)
	lost := watch.NewFake() // the first watch: ours, it hears of nothing
	var watches int
	watching := make(chan struct{}, 2)
	client.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		watches++
		watching <- struct{}{}
		if watches == 1 {
			return true, lost, nil
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := Watch(ctx, client, "n1")
	if u := next(t, ch); u.Op != kubetypes.ADD || len(u.Pods) != 3 {
		t.Fatalf("first update %s, want one ADD with a, b and same", describe(u))
	}
	<-watching

	// Changes the lost watch never delivers.
	pods := client.CoreV1().Pods("default")
	if err := pods.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Create(ctx, podOn("n1", "c"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a.Labels = map[string]string{"v": "2"}
	if _, err := pods.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	lost.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version"})

	expect(t, ch, "REMOVE b")
	got := map[string]bool{}
	for range 2 {
		got[describe(next(t, ch))] = true
	}
	if !got["UPDATE a"] || !got["ADD c"] {
		t.Errorf("after the new list: %v, want UPDATE a and ADD c", got)
	}
	<-watching // the reflector watches again
	select {
	case u := <-ch:
		t.Errorf("unexpected %s (nothing changed for \"same\")", describe(u))
	case <-time.After(200 * time.Millisecond):
	}
	cancel()
	waitClosed(t, ch)
}
