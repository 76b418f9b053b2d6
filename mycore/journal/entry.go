package journal

import (
	"fmt"
	"time"
)

// Kind says which part of the kubelet an Entry comes from. The live view
// gives each kind its colour; the terminal prints only the Text.
type Kind string

const (
	// Config is an op from a pod source (ADD, UPDATE, DELETE, ...); Call
	// holds the op.
	Config Kind = "config"
	// Worker is a pod worker's step (podworkers.Event); State is the
	// worker's state after it, Call the event kind (sync, transition,
	// retry, ...) and Took the wait on the pod cache before a sync.
	Worker Kind = "worker"
	// Sync is what a sync method decided or did (SyncPod, SyncTerminating…).
	Sync Kind = "sync"
	// Decision is computePodActions' result for one SyncPod.
	Decision Kind = "decision"
	// CRI is one call to the runtime; Call is its method, Took its latency.
	CRI Kind = "cri"
	// PLEG is one pod lifecycle event; Call is its type (ContainerStarted…).
	PLEG Kind = "pleg"
	// Relist is one PLEG relist, never printed: Took is how long it took,
	// Threshold how long without one makes the PLEG unhealthy.
	Relist Kind = "relist"
	// Probe is a probe result that changed; Call is the probe type.
	Probe Kind = "probe"
	// Status is the status manager at work; Version and Took (the delay
	// after the change) are set on a post.
	Status Kind = "status"
	// BackOff is a container held in crash-loop back-off until Until.
	BackOff Kind = "backoff"
	// Node is a whole node's state, for fleet mode's grid: Ready, lease
	// renewal and pods in Node*, never printed. One with Call "apiserver"
	// is the fleet's requests so far, in Version.
	Node Kind = "node"
	// Other is everything else a kubelet prints (admission, housekeeping,
	// garbage collection, mirror pods, volumes, log rotation, shutdown).
	Other Kind = "other"
)

// Entry is one step. Only Kind is required; Text, if set, is the line the
// terminal prints, exactly as the labs have always printed it (an Entry
// without Text — a relist — is for the live view only).
type Entry struct {
	// Seq numbers a Bus's entries from 1; At is when it was published.
	Seq uint64    `json:"seq"`
	At  time.Time `json:"at"`
	// Node is the node it happened on (set by the Bus).
	Node string `json:"node,omitempty"`
	Kind Kind   `json:"kind"`
	// Pod is "namespace/name", the live view's lane; UID tells apart two
	// pods of one name.
	Pod string `json:"pod,omitempty"`
	UID string `json:"uid,omitempty"`
	// Container is the container's name, where there is one.
	Container string `json:"container,omitempty"`
	// Call is the kind's verb: the CRI method, the PLEG event type, the
	// probe type, the config op, the worker event kind.
	Call string `json:"call,omitempty"`
	// State is the pod worker's state (SyncPod, TerminatingPod,
	// TerminatedPod) or a probe's result.
	State string `json:"state,omitempty"`
	// Took is a duration: a CRI call's latency, a relist's length, how
	// long a worker waited for the pod cache, a status post's delay after
	// the change.
	Took time.Duration `json:"took,omitempty"`
	// Until is when a back-off ends.
	Until time.Time `json:"until,omitzero"`
	// Threshold is the PLEG's relist threshold (a Relist entry).
	Threshold time.Duration `json:"threshold,omitempty"`
	// Counts is every CRI call the node made so far, by method (a Relist
	// entry): the calls about a pod are on its lane, but the relists' own
	// lists, Version, log rotation's and the streaming server's are about
	// no pod and show only here.
	Counts map[string]uint64 `json:"counts,omitempty"`
	// Version is a status post's version.
	Version uint64 `json:"version,omitempty"`
	// Failed marks a call or step that failed.
	Failed bool `json:"failed,omitempty"`
	// Node* describe a node (a Node entry, fleet mode): its Ready
	// condition and Lease renewal as the apiserver has them, and the pods
	// in its pod manager.
	NodeReady        bool      `json:"nodeReady,omitempty"`
	NodeLeaseRenewed time.Time `json:"nodeLeaseRenewed,omitzero"`
	NodePods         int       `json:"nodePods,omitempty"`
	// Text is the terminal's line.
	Text string `json:"text,omitempty"`
}

// Line is e with Text from a format: the common way to publish a printed
// step with its typed fields.
func Line(e Entry, format string, args ...any) Entry {
	e.Text = fmt.Sprintf(format, args...)
	return e
}
