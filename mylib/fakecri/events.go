package fakecri

import (
	"sort"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// GetContainerEvents feeds the kubelet's evented PLEG
// (pkg/kubelet/pleg/evented.go, v1.36.3). Like containerd
// (internal/cri/server/events.go) every event carries the pod sandbox
// status and the statuses of all the pod's containers, and sandboxes get
// events too, with the sandbox ID as container_id: the evented PLEG drops
// events without PodSandboxStatus.Metadata and uses a DELETED event for
// the sandbox ID to forget the pod.

// eventBuffer is how far a subscriber may fall behind before it is cut
// off with ResourceExhausted (the kubelet then reconnects and relists),
// rather than silently losing events or blocking the runtime.
const eventBuffer = 1024

type broadcaster struct {
	mu     sync.Mutex
	subs   map[*eventSub]struct{}
	closed bool
	n      atomic.Int32 // subscriber count, read without the lock on the hot path
}

type eventSub struct {
	ch       chan *runtimeapi.ContainerEventResponse
	overflow bool // set (under broadcaster.mu) before ch is closed for lag
}

func newBroadcaster() *broadcaster {
	return &broadcaster{subs: map[*eventSub]struct{}{}}
}

func (b *broadcaster) subscribe() *eventSub {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := &eventSub{ch: make(chan *runtimeapi.ContainerEventResponse, eventBuffer)}
	if b.closed {
		close(s.ch)
		return s
	}
	b.subs[s] = struct{}{}
	b.n.Add(1)
	return s
}

func (b *broadcaster) unsubscribe(s *eventSub) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.subs[s]; ok {
		delete(b.subs, s)
		b.n.Add(-1)
		close(s.ch)
	}
}

// publish never blocks. Callers hold Runtime.mu, so subscribers see events
// in the order the state changed.
func (b *broadcaster) publish(ev *runtimeapi.ContainerEventResponse) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		select {
		case s.ch <- ev:
		default:
			s.overflow = true
			delete(b.subs, s)
			b.n.Add(-1)
			close(s.ch)
		}
	}
}

func (b *broadcaster) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for s := range b.subs {
		delete(b.subs, s)
		close(s.ch)
	}
	b.n.Store(0)
}

// GetContainerEvents streams events until the client goes away.
func (r *Runtime) GetContainerEvents(_ *runtimeapi.GetEventsRequest, stream grpc.ServerStreamingServer[runtimeapi.ContainerEventResponse]) error {
	sub := r.events.subscribe()
	defer r.events.unsubscribe(sub)
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case ev, ok := <-sub.ch:
			if !ok {
				r.events.mu.Lock()
				lagged := sub.overflow
				r.events.mu.Unlock()
				if lagged {
					return status.Errorf(codes.ResourceExhausted, "event stream fell more than %d events behind; reconnect and relist", eventBuffer)
				}
				return status.Error(codes.Unavailable, "runtime is shutting down")
			}
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
}

// SubscribeEvents is the in-process form of GetContainerEvents. Events
// arrive on the channel until cancel is called or the runtime closes.
func (r *Runtime) SubscribeEvents() (events <-chan *runtimeapi.ContainerEventResponse, cancel func()) {
	sub := r.events.subscribe()
	return sub.ch, func() { r.events.unsubscribe(sub) }
}

// emitContainerEvent publishes an event about c. Caller holds r.mu.
func (r *Runtime) emitContainerEvent(c *container, t runtimeapi.ContainerEventType) {
	if r.events.n.Load() == 0 {
		return
	}
	sb := r.sandboxes[c.sandboxID]
	if sb == nil {
		return
	}
	r.events.publish(r.buildEvent(c.id, sb, t))
}

// emitSandboxEvent publishes an event whose container_id is the sandbox.
// Caller holds r.mu.
func (r *Runtime) emitSandboxEvent(sb *sandbox, t runtimeapi.ContainerEventType) {
	if r.events.n.Load() == 0 {
		return
	}
	r.events.publish(r.buildEvent(sb.id, sb, t))
}

func (r *Runtime) buildEvent(id string, sb *sandbox, t runtimeapi.ContainerEventType) *runtimeapi.ContainerEventResponse {
	return &runtimeapi.ContainerEventResponse{
		ContainerId:        id,
		ContainerEventType: t,
		CreatedAt:          r.nowNano(),
		PodSandboxStatus:   sb.status(),
		ContainersStatuses: sandboxContainerStatuses(sb),
	}
}

// sandboxContainerStatuses lists the statuses of a sandbox's containers,
// oldest first. Caller holds r.mu.
func sandboxContainerStatuses(sb *sandbox) []*runtimeapi.ContainerStatus {
	cs := make([]*container, 0, len(sb.containers))
	for _, c := range sb.containers {
		cs = append(cs, c)
	}
	sortContainers(cs)
	out := make([]*runtimeapi.ContainerStatus, len(cs))
	for i, c := range cs {
		out[i] = c.status()
	}
	return out
}

func sortContainers(cs []*container) {
	sort.Slice(cs, func(i, j int) bool { return cs[i].seq < cs[j].seq })
}
