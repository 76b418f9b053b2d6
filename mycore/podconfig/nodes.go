package podconfig

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
)

// WatchNodes is Watch for many nodes in one process (fleet mode): ONE
// informer on every bound pod of the cluster (field selector
// spec.nodeName!=""), whose events are handed to the node each pod is bound
// to. Each node gets its own channel with exactly what Watch would send it:
// one ADD with its initial list (possibly empty) first, then ADD, UPDATE,
// DELETE, RECONCILE and REMOVE as Classify decides, from its own record of
// the pods it was sent. Pods bound to other nodes are ignored.
//
// One informer instead of N: N informers are N watches the apiserver must
// feed and N caches of the same objects; one list and one watch cost the
// same for 1 node or 1,000. (The kubelet's per-node field selector exists
// so that the Node authorizer can let each node see only its own pods — a
// check fleet mode gives up by sharing a credential.)
//
// The informer's handler sends to the nodes one after the other: a node
// that stops reading its channel (buffer UpdatesBuffer) holds up the
// others, as a kubelet's own sync loop holds up its source. Receivers must
// keep reading until ctx ends. Every channel is closed once ctx has ended
// and the informer has stopped.
func WatchNodes(ctx context.Context, client kubernetes.Interface, nodeNames []string) map[string]<-chan kubetypes.PodUpdate {
	mergers := make(map[string]*merger, len(nodeNames))
	outs := make(map[string]chan kubetypes.PodUpdate, len(nodeNames))
	result := make(map[string]<-chan kubetypes.PodUpdate, len(nodeNames))
	for _, n := range nodeNames {
		if _, dup := outs[n]; dup {
			continue
		}
		out := make(chan kubetypes.PodUpdate, UpdatesBuffer)
		outs[n], result[n] = out, out
		mergers[n] = &merger{ctx: ctx, out: out, known: map[types.UID]*v1.Pod{}}
	}
	closeAll := func() {
		for _, out := range outs {
			close(out)
		}
	}

	lw := boundPodsListWatch(client)
	// A LIST then a WATCH, never a watch-list stream (client-go's
	// WatchListClient: the initial list sent as a watch's events). For a
	// kubelet's hundred pods the stream is cheaper; for a fleet's tens of
	// thousands, sent event by event through the apiserver's 100-event
	// buffer for each watcher to a process that is busy running a thousand
	// nodes, the stream was closed as too slow and begun again, minute
	// after minute, while no node heard of a deleted pod (issue 23:
	// 25,000 pods, all Terminating, none gone). A LIST at the informer's
	// resourceVersion is one answer from the watch cache.
	informer := cache.NewSharedIndexInformer(listThenWatch{lw}, &v1.Pod{}, 0, cache.Indexers{})
	// No node reads managedFields (who wrote which field, for server-side
	// apply): dropped before the cache, they are not kept once in the
	// cache and again in each node's copies — with thousands of pods,
	// that is a good part of the memory.
	_ = informer.SetTransform(func(obj any) (any, error) {
		if p, ok := obj.(*v1.Pod); ok {
			p.ManagedFields = nil
		}
		return obj, nil
	})
	d := &dispatcher{mergers: mergers}
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    d.onAdd,
		UpdateFunc: d.onUpdate,
		DeleteFunc: d.onDelete,
	})
	if err != nil { // only when the informer was stopped already: cannot be
		closeAll()
		return result
	}
	go func() {
		defer closeAll()
		var wg sync.WaitGroup
		wg.Go(func() { informer.RunWithContext(ctx) })
		if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
			// Every node's first update, even a node with no pod: the
			// kubelet takes it as "the apiserver source is ready".
			for _, m := range mergers {
				m.flushInitialList()
			}
		}
		wg.Wait()
	}()
	return result
}

// listPageSize is how many pods each LIST of the fleet's pod informer
// asks for: client-go's pager default (tools/pager/pager.go:31, v0.36.3).
var listPageSize int64 = 500

// boundPodsListWatch lists and watches every pod bound to a node. Asked
// for the whole list at once (Limit 0), it gets it in pages of
// listPageSize and hands back one list. The reflector asks for the whole
// list in one answer when it lists again at a resourceVersion — so the
// apiserver can answer from its watch cache (reflector.go:696-717) — and
// a whole fleet's pods in one answer did not arrive within the
// apiserver's one-minute request timeout: at 25,000 pods (70 MB) the
// stream was reset ("INTERNAL_ERROR; received from peer") minute after
// minute while no node heard of a deleted pod (issue 23). Pages at a
// resourceVersion come from the watch cache's snapshots
// (ListFromCacheSnapshot, on by default since v1.34), each within its own
// timeout. The pages are joined here, not left to the reflector's pager:
// when a continue token has expired, the pager asks once more for the
// whole list (Limit 0) and takes the first answer as all of it
// (pager.go:110-124) — a first page taken for the whole list would tell
// the informer that every other pod was deleted.
func boundPodsListWatch(client kubernetes.Interface) *cache.ListWatch {
	selector := fields.OneTermNotEqualSelector("spec.nodeName", "").String()
	pods := client.CoreV1().Pods(metav1.NamespaceAll)
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			if o.Limit > 0 || o.Continue != "" {
				return pods.List(ctx, o) // a pager's page
			}
			o.Limit = listPageSize
			all, err := pods.List(ctx, o)
			for err == nil && all.Continue != "" {
				// The next pages carry the first one's resourceVersion in
				// their token: one consistent list.
				var page *v1.PodList
				page, err = pods.List(ctx, metav1.ListOptions{FieldSelector: selector, Limit: listPageSize, Continue: all.Continue})
				if err == nil {
					all.Items = append(all.Items, page.Items...)
					all.Continue, all.RemainingItemCount = page.Continue, nil
				}
			}
			if err != nil {
				return nil, err // an expired token too: the reflector lists again
			}
			return all, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return pods.Watch(ctx, o)
		},
	}
}

// dispatcher routes each informer event to the merger of the pod's node.
// Informer handlers of one registration run one at a time, so the order
// of events per pod is kept.
type dispatcher struct {
	mergers map[string]*merger
}

func nodeOf(obj any) (*v1.Pod, string) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, ""
	}
	return pod, pod.Spec.NodeName
}

func (d *dispatcher) onAdd(obj any, isInInitialList bool) {
	if _, node := nodeOf(obj); d.mergers[node] != nil {
		d.mergers[node].onAdd(obj, isInInitialList)
	}
}

func (d *dispatcher) onUpdate(oldObj, newObj any) {
	oldPod, oldNode := nodeOf(oldObj)
	newPod, newNode := nodeOf(newObj)
	if oldPod == nil || newPod == nil {
		return
	}
	if oldNode != newNode {
		// spec.nodeName is set once and never changes; the same name
		// deleted and created again on another node between two events
		// can look like this: gone from one node, new on the other.
		if m := d.mergers[oldNode]; m != nil {
			m.onDelete(oldObj)
		}
		if m := d.mergers[newNode]; m != nil {
			m.onAdd(newObj, false)
		}
		return
	}
	if m := d.mergers[newNode]; m != nil {
		m.onUpdate(oldObj, newObj)
	}
}

func (d *dispatcher) onDelete(obj any) {
	if _, node := nodeOf(obj); d.mergers[node] != nil {
		d.mergers[node].onDelete(obj)
	}
}

// listThenWatch tells the reflector not to use the watch-list stream
// (client-go's util/watchlist.DoesClientNotSupportWatchListSemantics).
type listThenWatch struct{ *cache.ListWatch }

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }
