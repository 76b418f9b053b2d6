package fleet

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
)

// EventWriters is how many event broadcasters the fleet's nodes share,
// node i using broadcaster i mod EventWriters.
//
// A kubelet makes one broadcaster for its process (makeEventRecorder,
// cmd/kubelet/app/server.go:586-600, v1.36.3), and so did each node of
// the fleet: a queue of 1,000 events and a watcher with another 1,000,
// whatever the node records — half of an idle fleet's heap (issue 23).
// Shared, the cost is per broadcaster, and what a node's events go
// through is what a kubelet's go through: client-go's EventCorrelator,
// whose aggregation and spam filter are keyed by the event's source
// (kubelet, NODE) and object, so sharing one merges no two nodes' events.
// What is shared is the writer: each broadcaster writes its events one
// at a time, retrying a failed write as client-go does (up to 12 tries,
// 10 s apart) — so a few, to write in parallel, and one apiserver outage
// holds up 1/EventWriters of the fleet's events, not all of them. A
// broadcaster drops events when its queue is full, as a kubelet's does.
const EventWriters = 16

// fleetEvents are the broadcasters the fleet's nodes record their events
// with. Each event is written as the node that recorded it (its
// source.host), through the shared client: a node's event is a request of
// system:node:NAME, which the Node authorizer lets create and patch
// events.
type fleetEvents struct {
	mu           sync.RWMutex
	broadcasters []record.EventBroadcaster // nil once stopped
}

// startFleetEvents starts the broadcasters of n nodes; they write until
// ctx ends (a write in flight then is cancelled, as the fleet stops).
// Not on: none, and every recorder drops what it is given.
func startFleetEvents(ctx context.Context, events func(writer int) corev1client.EventsGetter, n int, on bool) *fleetEvents {
	e := &fleetEvents{}
	if !on {
		return e
	}
	for w := range min(n, EventWriters) {
		b := record.NewBroadcaster(record.WithContext(ctx))
		b.StartRecordingToSink(nodeEventSink{ctx: ctx, events: events(w)})
		e.broadcasters = append(e.broadcasters, b)
	}
	return e
}

// recorder is node i's recorder: events stamped with source kubelet/name,
// through broadcaster i mod EventWriters.
func (e *fleetEvents) recorder(i int, name string) record.EventRecorder {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if len(e.broadcasters) == 0 {
		return &fleetRecorder{e: e} // off, or stopped: records nothing
	}
	b := e.broadcasters[i%len(e.broadcasters)]
	return &fleetRecorder{e: e, r: b.NewRecorder(legacyscheme.Scheme, v1.EventSource{Component: "kubelet", Host: name})}
}

// stop ends the broadcasters, once every node has stopped. An event
// recorded after is dropped, without a word (a broadcaster that is shut
// down logs an error for each).
func (e *fleetEvents) stop() {
	e.mu.Lock()
	bs := e.broadcasters
	e.broadcasters = nil
	e.mu.Unlock()
	for _, b := range bs {
		b.Shutdown()
	}
}

// fleetRecorder is one node's recorder; it records nothing once the
// fleet's broadcasters are stopped.
type fleetRecorder struct {
	e *fleetEvents
	r record.EventRecorder
}

func (f *fleetRecorder) with(do func(record.EventRecorder)) {
	f.e.mu.RLock()
	defer f.e.mu.RUnlock()
	if f.r != nil && f.e.broadcasters != nil {
		do(f.r)
	}
}

func (f *fleetRecorder) Event(o runtime.Object, eventtype, reason, message string) {
	f.with(func(r record.EventRecorder) { r.Event(o, eventtype, reason, message) })
}

func (f *fleetRecorder) Eventf(o runtime.Object, eventtype, reason, format string, args ...any) {
	f.with(func(r record.EventRecorder) { r.Eventf(o, eventtype, reason, format, args...) })
}

func (f *fleetRecorder) AnnotatedEventf(o runtime.Object, annotations map[string]string, eventtype, reason, format string, args ...any) {
	f.with(func(r record.EventRecorder) { r.AnnotatedEventf(o, annotations, eventtype, reason, format, args...) })
}

// nodeEventSink writes each event as the node named by its source.host
// (see asNode). client-go's EventSinkImpl makes its requests with
// context.Background(), which names no node: the fleet refused every
// one of them (ErrNoNode) and its nodes' events were lost.
type nodeEventSink struct {
	ctx    context.Context
	events corev1client.EventsGetter
}

// as is the context of e's request: as its node. An event without one
// goes without, and is refused (ErrNoNode).
func (s nodeEventSink) as(e *v1.Event) context.Context {
	if e.Source.Host == "" {
		return s.ctx
	}
	return asNode(s.ctx, e.Source.Host)
}

func (s nodeEventSink) Create(e *v1.Event) (*v1.Event, error) {
	return s.events.Events(e.Namespace).CreateWithEventNamespaceWithContext(s.as(e), e)
}

func (s nodeEventSink) Update(e *v1.Event) (*v1.Event, error) {
	return s.events.Events(e.Namespace).UpdateWithEventNamespaceWithContext(s.as(e), e)
}

func (s nodeEventSink) Patch(e *v1.Event, data []byte) (*v1.Event, error) {
	return s.events.Events(e.Namespace).PatchWithEventNamespaceWithContext(s.as(e), e, data)
}

var (
	_ record.EventSink     = nodeEventSink{}
	_ record.EventRecorder = (*fleetRecorder)(nil)
)
