package podconfig

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
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

// TestFleetInformerListsInPages (real apiserver): asked for the whole
// list at a resourceVersion — as the reflector asks when it lists again
// (reflector.go:696-717) — the fleet's pod informer gets it in pages of
// listPageSize and hands back all of it, the same pods one LIST returns;
// asked for a page (a pager's), it gets that page.
func TestFleetInformerListsInPages(t *testing.T) {
	cfg := testenv.AdminConfig(t)
	var lists []string
	var mu sync.Mutex
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodGet && r.URL.Path == "/api/v1/pods" && r.URL.Query().Get("watch") == "" {
				mu.Lock()
				lists = append(lists, r.URL.Query().Get("limit"))
				mu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	})
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
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

	one, err := admin.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName!="})
	if err != nil {
		t.Fatal(err)
	}
	lw := boundPodsListWatch(admin)
	mu.Lock()
	lists = nil
	mu.Unlock()
	got, err := lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: one.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	all := got.(*v1.PodList)
	mu.Lock()
	requests := append([]string(nil), lists...)
	mu.Unlock()
	if want := (len(one.Items) + 1) / 2; len(requests) != want || slices.ContainsFunc(requests, func(l string) bool { return l != "2" }) {
		t.Errorf("the whole list of %d pods took LISTs with limits %q, want %d with limit 2", len(one.Items), requests, want)
	}
	if all.Continue != "" || all.ResourceVersion != one.ResourceVersion || len(all.Items) != len(one.Items) {
		t.Errorf("the whole list: %d pods at resourceVersion %s, continue %q; one LIST: %d at %s", len(all.Items), all.ResourceVersion, all.Continue, len(one.Items), one.ResourceVersion)
	}
	seen := map[string]bool{}
	for _, p := range all.Items {
		seen[p.Namespace+"/"+p.Name] = true
	}
	for _, n := range names {
		if !seen["default/"+n] {
			t.Errorf("%s missing from the paged list", n)
		}
	}

	page, err := lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: one.ResourceVersion, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if p := page.(*v1.PodList); len(p.Items) != 2 || p.Continue == "" {
		t.Errorf("a pager's page of 2: %d pods, continue %q", len(p.Items), p.Continue)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
