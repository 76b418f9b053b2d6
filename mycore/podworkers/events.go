package podworkers

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/kubelet"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
)

// EventKind says what happened to a pod's worker.
type EventKind string

const (
	// Started: the pod's goroutine was created (first update for the UID).
	Started EventKind = "started"
	// Transition: the pod moved from one state to the next (From → To).
	Transition EventKind = "transition"
	// Coalesced: an update replaced one still pending; the older one will
	// never be synced on its own.
	Coalesced EventKind = "coalesced"
	// Cancelled: a running sync's context was cancelled because termination
	// was requested, or the grace period shortened, during it.
	Cancelled EventKind = "cancelled"
	// Sync: a sync method is about to run. Wait is how long the worker
	// blocked on the pod cache (GetNewerThan) first.
	Sync EventKind = "sync"
	// Retry: a sync failed; the worker tries again after Delay.
	Retry EventKind = "retry"
	// Finished: SyncTerminatedPod succeeded, the goroutine exits.
	Finished EventKind = "finished"
	// Removed: SyncKnownPods forgot a finished pod that is no longer desired.
	Removed EventKind = "removed"
	// Ignored: an update was dropped (the pod is finished, or a create came
	// for a UID that is still terminating).
	Ignored EventKind = "ignored"
)

// Event reports one step of a pod's worker, for printing and tests.
type Event struct {
	Kind EventKind
	UID  types.UID
	Pod  string // namespace/name
	// State is the pod's state after the event; From is the state before a
	// Transition.
	From, State kubelet.PodWorkerState
	UpdateType  kubetypes.SyncPodType
	// GracePeriod in seconds, once termination was requested (else 0).
	GracePeriod int64
	Reason      string
	Wait, Delay time.Duration
	Err         error
}

func (e Event) String() string {
	s := fmt.Sprintf("%-10s %s", e.Kind, e.Pod)
	switch e.Kind {
	case Transition:
		s += fmt.Sprintf(" %s → %s", e.From, e.State)
	case Sync:
		s += fmt.Sprintf(" %s (%s", syncMethod(e.State, e.Reason), e.UpdateType)
		if e.State == kubelet.TerminatingPod && e.GracePeriod > 0 {
			s += fmt.Sprintf(", grace=%ds", e.GracePeriod)
		}
		s += fmt.Sprintf(") after waiting %s for the pod cache", e.Wait.Round(time.Millisecond))
		return s
	case Retry:
		s += fmt.Sprintf(" in %s: %v", e.Delay.Round(time.Millisecond), e.Err)
	default:
		s += " " + e.State.String()
	}
	if e.GracePeriod > 0 && e.Kind != Sync {
		s += fmt.Sprintf(" grace=%ds", e.GracePeriod)
	}
	if e.Reason != "" && e.Kind != Sync {
		s += ": " + e.Reason
	}
	return s
}

// syncMethod names the Syncer method a state runs.
func syncMethod(state kubelet.PodWorkerState, reason string) string {
	switch state {
	case kubelet.TerminatingPod:
		if reason == runtimePodReason {
			return "SyncTerminatingRuntimePod"
		}
		return "SyncTerminatingPod"
	case kubelet.TerminatedPod:
		return "SyncTerminatedPod"
	default:
		return "SyncPod"
	}
}

const runtimePodReason = "runtime pod"

// emit queues an event for OnEvent, filling in what the pod's status
// knows. Call with w.mu held: events are queued in the order the state
// changed.
func (w *Workers) emit(s *podStatus, uid types.UID, e Event) {
	if w.events == nil {
		return
	}
	e.UID, e.Pod = uid, s.name
	if e.Kind != Sync { // a Sync event carries the state it runs for
		e.State = s.state()
	}
	if s.terminationRequested() {
		e.GracePeriod = s.gracePeriod
	}
	w.events.push(e)
}

// emitSync reports that a Syncer method is about to run.
func (w *Workers) emitSync(uid types.UID, work kubelet.PodWorkerState, u kubelet.UpdatePodOptions, waited time.Duration) {
	if w.events == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.pods[uid]
	if !ok {
		return
	}
	e := Event{Kind: Sync, State: work, UpdateType: u.UpdateType, Wait: waited}
	if u.RunningPod != nil {
		e.Reason = runtimePodReason
	}
	w.emit(s, uid, e)
}

// eventQueue delivers events to OnEvent from one goroutine, in order,
// without ever blocking the workers.
type eventQueue struct {
	fn    func(Event)
	mu    sync.Mutex
	items []Event
	wake  chan struct{}
	done  chan struct{}
	exit  chan struct{}
}

func newEventQueue(fn func(Event)) *eventQueue {
	q := &eventQueue{fn: fn, wake: make(chan struct{}, 1), done: make(chan struct{}), exit: make(chan struct{})}
	go q.run()
	return q
}

func (q *eventQueue) push(e Event) {
	q.mu.Lock()
	q.items = append(q.items, e)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *eventQueue) run() {
	defer close(q.exit)
	for {
		q.mu.Lock()
		items := q.items
		q.items = nil
		q.mu.Unlock()
		for _, e := range items {
			q.fn(e)
		}
		if len(items) > 0 {
			continue
		}
		select {
		case <-q.wake:
		case <-q.done:
			q.mu.Lock()
			left := len(q.items)
			q.mu.Unlock()
			if left == 0 {
				return
			}
		}
	}
}

// close delivers what is queued, then ends the goroutine.
func (q *eventQueue) close() {
	close(q.done)
	<-q.exit
}
