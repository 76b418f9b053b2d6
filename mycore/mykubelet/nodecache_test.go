package mykubelet

import (
	"context"
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"

	"kubelet-labs/mycore/journal"
)

// The Node admission is given, in the kubelet's order (GetCachedNode,
// kubelet_nodecache.go:30-70): the cache's; the last one seen while the
// cache has none; the Node the node registers (initialNode) before any;
// and, with no InitialNode, the apiserver's. Without any of them the pod
// is rejected with upstream's InvalidNodeInfo.
func TestAdmissionNode(t *testing.T) {
	ctx := context.Background()
	node := func(rv string, labels map[string]string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: rv, Labels: labels}}
	}
	var fromCache *v1.Node
	cached := func(context.Context) (*v1.Node, error) {
		if fromCache == nil {
			return nil, apierrors.NewNotFound(v1.Resource("nodes"), "n1")
		}
		return fromCache, nil
	}
	initial := node("", map[string]string{"from": "initial"})
	c := &nodeCache{name: "n1", client: fake.NewClientset(node("3", map[string]string{"from": "apiserver"})), cached: cached, initial: func() *v1.Node { return initial }}

	get := func(useCache bool) string {
		t.Helper()
		n, err := c.get(ctx, useCache)
		if err != nil {
			t.Fatal(err)
		}
		return n.Labels["from"]
	}
	if got := get(true); got != "initial" {
		t.Errorf("nothing cached: the Node from %q, want the initial one", got)
	}
	fromCache = node("5", map[string]string{"from": "cache"})
	if got := get(true); got != "cache" {
		t.Errorf("cached: the Node from %q, want the cache's", got)
	}
	fromCache = nil
	if got := get(true); got != "cache" {
		t.Errorf("the cache lost it: the Node from %q, want the last seen (the cache's)", got)
	}
	if got := get(false); got != "apiserver" {
		t.Errorf("useCache false: the Node from %q, want the apiserver's", got)
	}
	c.last, c.initial = nil, nil
	if got := get(true); got != "apiserver" {
		t.Errorf("no initial Node: the Node from %q, want the apiserver's", got)
	}

	// No Node at all: upstream's InvalidNodeInfo.
	k := &Kubelet{node: &nodeCache{name: "n1", client: fake.NewClientset(), cached: cached},
		journal: journal.New(journal.Options{Node: "n1", Backlog: -1})}
	r := k.newPredicateAdmission().Admit(&lifecycle.PodAdmitAttributes{Pod: &v1.Pod{}})
	if r.Admit || r.Reason != lifecycle.InvalidNodeInfo || r.Message != "Kubelet cannot get node info." {
		t.Errorf("no Node: admit=%v %q %q, want a rejection with InvalidNodeInfo", r.Admit, r.Reason, r.Message)
	}
}

// The cache's Node is shared (fleet mode: one informer for every node)
// and admission must not write it: upstream's OS check puts this OS into
// the labels of the Node it is given when they name another
// (predicate.go:280-288), and the runtime's features go into
// status.features. The Node given is a copy where it differs.
func TestAdmissionLeavesTheCachedNodeAlone(t *testing.T) {
	shared := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{v1.LabelOSStable: "plan9"}}}
	strict := true
	k := &Kubelet{node: &nodeCache{name: "n1", cached: func(context.Context) (*v1.Node, error) { return shared, nil }},
		journal: journal.New(journal.Options{Node: "n1", Backlog: -1}), runtimeFeatures: &kubecontainer.RuntimeFeatures{SupplementalGroupsPolicy: strict}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{v1.LabelOSStable: runtime.GOOS}},
		Spec: v1.PodSpec{NodeName: "n1"}}
	k.newPredicateAdmission().Admit(&lifecycle.PodAdmitAttributes{Pod: pod})
	if got := shared.Labels[v1.LabelOSStable]; got != "plan9" || shared.Status.Features != nil {
		t.Errorf("the cache's Node after admission: os label %q, status.features %v; want plan9 and none, as before", got, shared.Status.Features)
	}
}
