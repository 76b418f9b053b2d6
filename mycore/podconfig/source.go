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

// UpdatesBuffer is the capacity of the channel Watch returns: the same 50
// as PodConfig's updates channel (config.go:62).
const UpdatesBuffer = 50

// Watch starts the apiserver pod source of node nodeName: every pod whose
// spec.nodeName is nodeName, in every namespace, as the kubelet lists them
// (apiserver.go:37, a field selector, so the apiserver filters and the Node
// authorizer allows it), with a client-go reflector, as the kubelet's
// (apiserver.go:65).
//
// Updates arrive on the returned channel:
//
//   - first one ADD with every pod of the initial list — possibly none: the
//     kubelet takes that first update as "this source is ready"
//     (config.go:163-168) — sorted by the handler, not here;
//   - then one update per change, with the op Classify decides;
//   - REMOVE when a pod is gone from the apiserver (deleted for good);
//   - after a lost watch, the reflector lists again: REMOVE for each pod
//     no longer listed, then the op of each listed pod that changed, as
//     podStorage.merge does with a new SET (config.go:226-247).
//
// Every pod carries the kubernetes.io/config.source=api annotation and the
// first-seen annotation, as the kubelet's pods do. Receivers may keep the
// pods sent but must not change them (merger.send).
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
	// A reflector and a store, no informer: upstream's source is a
	// reflector into an UndeltaStore that hands every change to PodConfig
	// (apiserver.go:57-65); ours hands each change to the merger, which
	// keeps the pods anyway. An informer would add a queue, a cache of
	// the same pods and four goroutines — per node, in fleet mode. The
	// wrapper tells the reflector whether client can stream the initial
	// list (WatchList); generated informers do the same, and a fake
	// clientset says it cannot.
	m := &merger{ctx: ctx, out: out, known: map[types.UID]*v1.Pod{}, byName: map[string]types.UID{}}
	r := cache.NewReflectorWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client), &v1.Pod{}, sourceStore{m},
		cache.ReflectorOptions{Name: "pods of node " + nodeName, TypeDescription: "*v1.Pod"})
	go func() {
		defer close(out)
		r.RunWithContext(ctx) // returns once ctx has ended
	}()
	return out
}

// sourceStore is the reflector's store: each change goes to the merger.
// Replace is a whole list — the first, or one after a lost watch.
type sourceStore struct{ m *merger }

func (s sourceStore) Add(obj any) error    { s.m.onChange(obj); return nil }
func (s sourceStore) Update(obj any) error { s.m.onChange(obj); return nil }
func (s sourceStore) Delete(obj any) error { s.m.onDelete(obj); return nil }
func (s sourceStore) Resync() error        { return nil } // no resync period

func (s sourceStore) Replace(objs []any, _ string) error {
	pods := make([]*v1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok {
			pods = append(pods, p)
		}
	}
	s.m.replace(pods)
	return nil
}

// merger keeps the last version of every pod it sent, by UID as
// podStorage does (config.go:109), to classify the next one.
type merger struct {
	ctx context.Context
	out chan<- kubetypes.PodUpdate

	mu      sync.Mutex
	known   map[types.UID]*v1.Pod
	byName  map[string]types.UID // namespace/name → the UID known under it
	flushed bool                 // the initial list was sent
}

func nameOf(p *v1.Pod) string { return p.Namespace + "/" + p.Name }

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

// replace takes a whole list. The first one is sent as one ADD, even an
// empty one: the reflector's first list reaches the kubelet as a single
// SET, which merge turns into a single ADD. A later one — the reflector
// lists again after a lost watch — is compared with what was sent, as
// merge compares a new SET with the pods it has (config.go:226-247):
// REMOVE for each pod no longer listed (first, as Merge sends removes
// first, config.go:151-153), then each listed pod as a change.
func (m *merger) replace(pods []*v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.flushed {
		m.flushed = true
		initial := make([]*v1.Pod, 0, len(pods))
		for _, pod := range pods {
			p := annotated(pod, nil)
			m.known[p.UID] = p
			m.byName[nameOf(p)] = p.UID
			initial = append(initial, p)
		}
		m.send(kubetypes.ADD, initial...)
		return
	}
	listed := make(map[types.UID]bool, len(pods))
	for _, pod := range pods {
		listed[pod.UID] = true
	}
	for uid, known := range m.known {
		if !listed[uid] {
			m.remove(known)
		}
	}
	for _, pod := range pods {
		m.apply(pod)
	}
}

// onChange is a watch's ADDED or MODIFIED.
func (m *merger) onChange(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.apply(pod)
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
	m.remove(pod)
}

// apply sends ADD for a pod we did not know, or the op Classify decides.
// A pod of a name known under another UID was deleted and created again
// between two events: for the kubelet (which keys by UID) that is a
// REMOVE of one pod and an ADD of another, as podStorage's UID-keyed
// merge of a SET makes it (config.go:229-237).
func (m *merger) apply(pod *v1.Pod) {
	if uid, ok := m.byName[nameOf(pod)]; ok && uid != pod.UID {
		if old := m.known[uid]; old != nil {
			m.remove(old)
		}
	}
	m.byName[nameOf(pod)] = pod.UID
	known := m.known[pod.UID]
	ref := annotated(pod, known)
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

// annotated marks the reflector's pod with the source's annotations, in
// place: each object the reflector hands over was decoded for this source
// alone and is kept by nobody else (the store is the merger), so no copy
// is needed — with an informer in between, a copy was (its cache shared
// the object). managedFields (who wrote which field, for server-side
// apply) are dropped: no part of a kubelet reads them, and with thousands
// of pods in a fleet they are a good part of the memory.
func annotated(pod, known *v1.Pod) *v1.Pod {
	pod.ManagedFields = nil
	annotate(pod, known)
	return pod
}

// remove sends REMOVE with the last version we knew.
func (m *merger) remove(pod *v1.Pod) {
	known, ok := m.known[pod.UID]
	if !ok {
		return // never sent (e.g. added and deleted before the first list)
	}
	delete(m.known, pod.UID)
	if m.byName[nameOf(known)] == known.UID {
		delete(m.byName, nameOf(known))
	}
	m.send(kubetypes.REMOVE, known)
}
