package podconfig

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"
	"k8s.io/client-go/util/watchlist"

	"kubelet-labs/internal/testenv"
)

// TestFleetInformerListsThenWatches: the reflector asks exactly this
// (client-go v0.36.3 tools/cache/reflector.go:362) before it streams the
// initial list as watch events; the fleet's pod informer must say no
// (nodes.go, listThenWatch).
func TestFleetInformerListsThenWatches(t *testing.T) {
	if !watchlist.DoesClientNotSupportWatchListSemantics(listThenWatch{&cache.ListWatch{}}) {
		t.Error("the fleet's pod informer would stream its initial list as watch events")
	}
}

// TestFleetInformerListsInPages (real apiserver): the fleet's pod
// informer lists in pages even when the reflector asks for one answer at
// a resourceVersion (it sets the pager's page size to 0 then,
// reflector.go:697-712), and the pager, following the continue tokens,
// gets every bound pod — the same as one LIST would.
func TestFleetInformerListsInPages(t *testing.T) {
	admin := testenv.AdminClient(t)
	ctx := context.Background()
	testenv.WaitDefaultServiceAccount(t, admin)
	pods := admin.CoreV1().Pods("default")
	var names []string
	for i := range 5 {
		p := podOn("t-page-node", fmt.Sprintf("t-page-%d", i))
		p.UID = ""
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		names = append(names, p.Name)
	}
	t.Cleanup(func() { forceDelete(pods, names...) })
	old := listPageSize
	listPageSize = 2
	t.Cleanup(func() { listPageSize = old })

	all, err := admin.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName!="})
	if err != nil {
		t.Fatal(err)
	}
	lw := boundPodsListWatch(admin)
	first, err := lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: all.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	if page := first.(*v1.PodList); len(page.Items) != 2 || page.Continue == "" {
		t.Fatalf("a LIST at resourceVersion %s: %d pods, continue %q; want a page of 2 and a continue token", all.ResourceVersion, len(page.Items), page.Continue)
	}
	p := pager.New(pager.SimplePageFunc(func(o metav1.ListOptions) (runtime.Object, error) { return lw.ListWithContext(ctx, o) }))
	p.PageSize = 0 // as the reflector sets it
	got, paged, err := p.ListWithAlloc(ctx, metav1.ListOptions{ResourceVersion: all.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	if err := meta.EachListItem(got, func(o runtime.Object) error {
		seen[o.(*v1.Pod).Namespace+"/"+o.(*v1.Pod).Name] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !paged || len(seen) != len(all.Items) {
		t.Errorf("the pager: %d pods (paginated %v), one LIST: %d", len(seen), paged, len(all.Items))
	}
	for _, n := range names {
		if !seen["default/"+n] {
			t.Errorf("%s missing from the paged list", n)
		}
	}
}
