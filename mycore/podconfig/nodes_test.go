package podconfig

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
)

// TestWatchNodes (fake clientset): one informer, one channel per node;
// each node sees its own initial ADD (empty for a node without pods) and
// then exactly the ops Watch would send it, and nothing of other nodes'
// pods. After cancel every channel closes and no goroutine is left.
func TestWatchNodes(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	a, b, x := podOn("n1", "a"), podOn("n1", "b"), podOn("elsewhere", "x")
	client := fake.NewClientset(a, b, x)
	var watches atomic.Int32
	watching := make(chan struct{}, 1)
	client.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		watches.Add(1)
		select {
		case watching <- struct{}{}:
		default:
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	chs := WatchNodes(ctx, client, []string{"n1", "n2"})
	if len(chs) != 2 {
		t.Fatalf("%d channels, want 2", len(chs))
	}
	n1, n2 := chs["n1"], chs["n2"]
	if u := next(t, n1); u.Op != kubetypes.ADD || len(u.Pods) != 2 {
		t.Fatalf("n1 first update %s, want one ADD with a and b", describe(u))
	}
	if u := next(t, n2); u.Op != kubetypes.ADD || len(u.Pods) != 0 {
		t.Fatalf("n2 first update %s, want an empty ADD", describe(u))
	}
	<-watching

	pods := client.CoreV1().Pods("default")
	c := podOn("n2", "c")
	if _, err := pods.Create(ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, n2, "ADD c")
	c.Status.Phase = v1.PodRunning
	if _, err := pods.UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, n2, "RECONCILE c")
	a.Labels = map[string]string{"v": "2"}
	if _, err := pods.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, n1, "UPDATE a")
	now, grace := metav1.Now(), int64(30)
	c.DeletionTimestamp, c.DeletionGracePeriodSeconds = &now, &grace
	if _, err := pods.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, n2, "DELETE c")
	if err := pods.Delete(ctx, "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, n2, "REMOVE c")
	// Another node's pod changes: neither channel hears of it.
	x.Labels = map[string]string{"v": "2"}
	if _, err := pods.Update(ctx, x, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, n1, "REMOVE b") // the first thing n1 hears after UPDATE a
	select {
	case u := <-n2:
		t.Fatalf("n2 got %s for a pod of another node", describe(u))
	case <-time.After(200 * time.Millisecond):
	}
	if n := watches.Load(); n != 1 {
		t.Errorf("%d pod watches, want 1 shared by every node", n)
	}

	cancel()
	waitClosed(t, n1)
	waitClosed(t, n2)
}
