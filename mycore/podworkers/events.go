package podworkers

import (
	"fmt"
	"time"

	"kubelet-labs/mycore/journal"

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
	grace := ""
	if e.GracePeriod > 0 {
		grace = fmt.Sprintf(", grace %ds", e.GracePeriod)
	}
	switch e.Kind {
	case Transition:
		s += fmt.Sprintf(" %s → %s%s", e.From, e.State, grace)
	case Sync:
		if e.State != kubelet.TerminatingPod {
			grace = ""
		}
		return s + fmt.Sprintf(" %s (%s%s) after waiting %s for the pod cache",
			syncMethod(e.State, e.Reason), e.UpdateType, grace, e.Wait.Round(time.Millisecond))
	case Retry:
		s += fmt.Sprintf(" [%s] in %s: %v", e.State, e.Delay.Round(time.Millisecond), e.Err)
	default:
		s += fmt.Sprintf(" [%s%s]", e.State, grace)
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// JournalEntry is e as an entry of the node's journal (mycore/journal),
// without its line: its kind as Call, the state after it, and for a sync
// the wait on the pod cache (for a retry: the delay before it).
func (e Event) JournalEntry() journal.Entry {
	j := journal.Entry{Kind: journal.Worker, Pod: e.Pod, UID: string(e.UID), Call: string(e.Kind), State: e.State.String(), Failed: e.Err != nil}
	switch e.Kind {
	case Sync:
		j.Took = e.Wait
	case Retry:
		j.Took = e.Delay
	}
	return j
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
// knows. Call with w.mu held, and release it with w.unlock, which
// delivers the event.
func (w *Workers) emit(s *podStatus, uid types.UID, e Event) {
	if w.opts.OnEvent == nil {
		return
	}
	e.UID, e.Pod = uid, s.name
	if e.Kind != Sync { // a Sync event carries the state it runs for
		e.State = s.state()
	}
	if s.terminationRequested() {
		e.GracePeriod = s.gracePeriod
	}
	w.queued = append(w.queued, e)
}

// emitSync reports that a Syncer method is about to run.
func (w *Workers) emitSync(uid types.UID, work kubelet.PodWorkerState, u kubelet.UpdatePodOptions, waited time.Duration) {
	if w.opts.OnEvent == nil {
		return
	}
	w.mu.Lock()
	defer w.unlock()
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

// unlock releases w.mu, then hands the events queued while it was held to
// OnEvent, on this goroutine, before returning: a worker's Sync event is
// delivered before its Syncer runs. Events are numbered under w.mu and
// delivered strictly in that order across goroutines (each waits for its
// turn without holding w.mu, so OnEvent may call the query methods).
func (w *Workers) unlock() {
	events := w.queued
	if len(events) == 0 {
		w.mu.Unlock()
		return
	}
	w.queued = nil
	first := w.ticket
	w.ticket += uint64(len(events))
	w.mu.Unlock()

	w.deliverMu.Lock()
	for w.delivered != first {
		w.deliverCond.Wait()
	}
	w.deliverMu.Unlock()
	for _, e := range events {
		w.opts.OnEvent(e)
	}
	w.deliverMu.Lock()
	w.delivered += uint64(len(events))
	w.deliverCond.Broadcast()
	w.deliverMu.Unlock()
}
