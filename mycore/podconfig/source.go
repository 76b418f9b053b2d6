package podconfig

import (
	"context"
	"maps"
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

// UpdatesBuffer is the capacity of the channel Watch returns: the same 50
// as PodConfig's updates channel (config.go:62).
const UpdatesBuffer = 50

// Watch starts the apiserver pod source of node nodeName: every pod whose
// spec.nodeName is nodeName, in every namespace, as the kubelet lists them
// (apiserver.go:37, a field selector, so the apiserver filters and the Node
// authorizer allows it).
//
// Updates arrive on the returned channel:
//
//   - first one ADD with every pod of the initial list — possibly none: the
//     kubelet takes that first update as "this source is ready"
//     (config.go:163-168) — sorted by the handler, not here;
//   - then one update per change, with the op Classify decides;
//   - REMOVE when a pod is gone from the apiserver (deleted for good).
//
// Every pod carries the kubernetes.io/config.source=api annotation and the
// first-seen annotation, as the kubelet's pods do. The pods sent are
// copies: receivers may keep and change them.
//
// The channel is closed once ctx has ended and every goroutine of the
// source has returned; a receiver that stops reading does not block it.
func Watch(ctx context.Context, client kubernetes.Interface, nodeName string) <-chan kubetypes.PodUpdate {
	out := make(chan kubetypes.PodUpdate, UpdatesBuffer)
	selector := fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
	pods := client.CoreV1().Pods(metav1.NamespaceAll)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return pods.Watch(ctx, o)
		},
	}
	// The wrapper tells the reflector whether client can stream the initial
	// list (WatchList); generated informers do the same, and a fake
	// clientset says it cannot.
	informer := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, client), &v1.Pod{}, 0, cache.Indexers{})
	m := &merger{ctx: ctx, out: out, known: map[types.UID]*v1.Pod{}}
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    m.onAdd,
		UpdateFunc: m.onUpdate,
		DeleteFunc: m.onDelete,
	})
	if err != nil { // only when the informer was stopped already: cannot be
		close(out)
		return out
	}
	go func() {
		defer close(out)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); informer.RunWithContext(ctx) }()
		if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
			m.flushInitialList()
		}
		wg.Wait() // RunWithContext returns after its reflector and handlers
	}()
	return out
}

// merger keeps the last version of every pod it sent, by UID as
// podStorage does (config.go:109), to classify the next one.
type merger struct {
	ctx context.Context
	out chan<- kubetypes.PodUpdate

	mu      sync.Mutex
	known   map[types.UID]*v1.Pod
	initial []*v1.Pod // the initial list, sent as one ADD
	flushed bool
}

// send delivers one update unless the source is stopping. The pods sent
// are the merger's own records, not copies: as upstream's podStorage
// sends the pods it keeps (config.go:212, :221-222, v1.36.3). Unlike
// upstream, which later changes a kept pod in place (checkAndUpdatePod,
// :362-389), the merger never changes a pod once it is sent — apply keeps
// a new copy for each version — so the receivers, which only read them,
// share them safely. A copy here was one more copy of every pod of the
// node: 89 MB of a fleet's 615 MB heap at 10,000 pods (issue 23).
func (m *merger) send(op kubetypes.PodOperation, pods ...*v1.Pod) {
	u := kubetypes.PodUpdate{Op: op, Source: kubetypes.ApiserverSource, Pods: pods}
	select {
	case m.out <- u:
	case <-m.ctx.Done():
	}
}

// flushInitialList sends the initial list as one ADD, once, before any
// later event: the reflector's first list reaches the kubelet as a single
// SET, which merge turns into a single ADD.
func (m *merger) flushInitialList() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flushLocked()
}

func (m *merger) flushLocked() {
	if m.flushed {
		return
	}
	m.flushed = true
	m.send(kubetypes.ADD, m.initial...)
	m.initial = nil
}

func (m *merger) onAdd(obj any, isInInitialList bool) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if isInInitialList && !m.flushed {
		p := annotatedCopy(pod, nil)
		m.known[p.UID] = p
		m.initial = append(m.initial, p)
		return
	}
	m.flushLocked()
	m.apply(pod)
}

func (m *merger) onUpdate(oldObj, newObj any) {
	oldPod, ok1 := oldObj.(*v1.Pod)
	newPod, ok2 := newObj.(*v1.Pod)
	if !ok1 || !ok2 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flushLocked()
	if oldPod.UID != newPod.UID {
		// Deleted and created again under the same name between two
		// watch events: for the kubelet (which keys by UID) that is a
		// REMOVE of one pod and an ADD of another.
		m.remove(oldPod)
	}
	m.apply(newPod)
}

func (m *merger) onDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flushLocked()
	m.remove(pod)
}

// apply sends ADD for a pod we did not know, or the op Classify decides.
func (m *merger) apply(pod *v1.Pod) {
	known := m.known[pod.UID]
	ref := annotatedCopy(pod, known)
	if known == nil {
		m.known[ref.UID] = ref
		m.send(kubetypes.ADD, ref)
		return
	}
	op, changed := Classify(known, ref)
	m.known[ref.UID] = ref
	if changed {
		m.send(op, ref)
	}
}

// annotatedCopy is the informer's pod with the source's annotations. The
// informer's object is shared (its cache, other handlers, and in fleet
// mode a thousand nodes) and must never change, so the annotations go on
// a copy — but only the Pod struct and its annotations are copied: spec,
// status, labels and the rest are the informer's, which every receiver
// only reads. A deep copy here was a third of what a fleet node keeps per
// pod (53 of 400 MB of heap at 7,000 pods, issue 23). make test runs
// with client-go's KUBE_CACHE_MUTATION_DETECTOR, which panics if anything
// downstream changes what it shares with the informer.
func annotatedCopy(pod, known *v1.Pod) *v1.Pod {
	ref := *pod
	ref.Annotations = maps.Clone(pod.Annotations)
	annotate(&ref, known)
	return &ref
}

// remove sends REMOVE with the last version we knew.
func (m *merger) remove(pod *v1.Pod) {
	known, ok := m.known[pod.UID]
	if !ok {
		return // never sent (e.g. added and deleted before the first list)
	}
	delete(m.known, pod.UID)
	m.send(kubetypes.REMOVE, known)
}
