package mykubelet

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"strconv"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
)

// nodeCache is the node's view of its own Node object, for admission: the
// kubelet's GetCachedNode (kubelet_nodecache.go:30-103). The cache is a
// Node lister — the node's own informer on its Node (kubelet.go:471-481:
// field selector metadata.name=NODE), or Options.GetNode, fleet mode's
// one shared informer — and the node keeps the newest Node it has seen,
// by resourceVersion, for when the lister has none or fails. With no
// Node in either (the informer has not listed yet, or the Node is not
// registered), the kubelet admits against the Node it would register
// (initialNode, kubelet_node_status.go:303): ours is
// Options.InitialNode; without it, the node asks the apiserver, as
// getNodeSync does, and a pod is rejected (InvalidNodeInfo) only if that
// fails too.
type nodeCache struct {
	name    string
	client  kubernetes.Interface
	initial func() *v1.Node // Options.InitialNode; may be nil
	// cached reads the Node from the cache; nil until Run starts the
	// node's informer (or Options.GetNode).
	cached func(ctx context.Context) (*v1.Node, error)

	mu   sync.Mutex
	last *v1.Node
}

// get is GetCachedNode: from the cache (useCache) or the apiserver.
func (c *nodeCache) get(ctx context.Context, useCache bool) (*v1.Node, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if useCache && c.cached != nil {
		if n, err := c.cached(ctx); err == nil {
			if c.last == nil || newerOrSame(n, c.last) {
				c.last = n
			}
			return c.last, nil
		}
	}
	if useCache && c.last != nil {
		return c.last, nil
	}
	if useCache && c.initial != nil {
		return c.initial(), nil
	}
	n, err := c.client.CoreV1().Nodes().Get(ctx, c.name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", c.name, err)
	}
	c.last = n
	return n, nil
}

// newerOrSame is isNewer (kubelet_nodecache.go:82-95): a resourceVersion
// that is not a number makes the informer's copy win, as upstream.
func newerOrSame(informer, cached *v1.Node) bool {
	a, errA := strconv.ParseInt(informer.ResourceVersion, 10, 64)
	b, errB := strconv.ParseInt(cached.ResourceVersion, 10, 64)
	return errA != nil || errB != nil || a >= b
}

// runInformer watches the node's own Node until ctx ends, and makes its
// store the cache. It returns once the informer has stopped.
func (c *nodeCache) runInformer(ctx context.Context) {
	factory := informers.NewSharedInformerFactoryWithOptions(c.client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector(metav1.ObjectNameField, c.name).String()
	}))
	nodes := factory.Core().V1().Nodes()
	lister, informer := nodes.Lister(), nodes.Informer()
	c.mu.Lock()
	c.cached = func(context.Context) (*v1.Node, error) { return lister.Get(c.name) }
	c.mu.Unlock()
	informer.RunWithContext(ctx)
}

// forAdmission is the Node upstream's predicate admit handler is given:
// a copy of n (the cache's object is shared and never written) with
//   - status.features the runtime's (features, when known), which the
//     kubelet posts in its node status (nodestatus/setters.go:431-447)
//     and our node status does not: the supplementalGroupsPolicy check
//     reads it (predicate.go:333-336);
//   - its own labels when the kubernetes.io/os label is not this OS's,
//     since rejectPodAdmissionBasedOnOSSelector writes that label into
//     the Node it is given (predicate.go:280-288).
func forAdmission(n *v1.Node, supplementalGroupsPolicy *bool) *v1.Node {
	c := *n
	if supplementalGroupsPolicy != nil {
		c.Status.Features = &v1.NodeFeatures{SupplementalGroupsPolicy: supplementalGroupsPolicy}
	}
	if c.Labels[v1.LabelOSStable] != runtime.GOOS {
		c.Labels = maps.Clone(c.Labels)
	}
	return &c
}
