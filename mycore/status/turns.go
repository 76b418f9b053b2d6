package status

import (
	"context"
	"fmt"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"
)

// WriteTurns are turns to write to the apiserver, shared by many status
// managers: fleet mode hands one WriteTurns to all its nodes, so a
// thousand managers have at most a few writes in flight and the others
// wait for a turn. A single kubelet has none (Options.Turns nil): its
// writes go out at once, as upstream's do.
//
// Why a fleet wants them. A thousand kubelets on one machine share one
// apiserver on the same two cores; with no limit every node's post is in
// flight at once, each waits behind all the others, and a status that
// changes while its post waits is posted twice — the containers stopped,
// then, a moment later, the terminal phase. Upstream's manager writes only
// the newest version of a pod it has when its loop comes round
// (syncBatch :1075-1148, needsUpdate :1229: an older version never goes
// out once a newer one is cached); a manager that waits for its turn and
// then takes the newest version is that rule under load: what was
// superseded while waiting is never sent. Each node still posts every
// status it has when its turn comes, in its own order, as its own
// identity: nothing about the node's behaviour changes but when.
type WriteTurns struct {
	c      chan struct{}
	waited atomic.Int64
}

// NewWriteTurns returns n turns (n ≥ 1).
func NewWriteTurns(n int) (*WriteTurns, error) {
	if n < 1 {
		return nil, fmt.Errorf("status writes in flight: %d, want at least 1", n)
	}
	return &WriteTurns{c: make(chan struct{}, n)}, nil
}

// take waits for a turn; the returned func gives it back. It fails only
// when ctx ends.
func (t *WriteTurns) take(ctx context.Context) (func(), error) {
	if t == nil {
		return func() {}, nil
	}
	select {
	case t.c <- struct{}{}:
		return func() { <-t.c }, nil
	default:
	}
	t.waited.Add(1)
	select {
	case t.c <- struct{}{}:
		return func() { <-t.c }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Waited is how many writes found every turn taken and waited: how
// often the turns, not the apiserver, held a post back.
func (t *WriteTurns) Waited() int64 { return t.waited.Load() }

// newest is the version of the pod's status cached now: what a post that
// waited for its turn sends instead of the one it was queued with.
// ok is false if the manager forgot the pod meanwhile.
func (m *Manager) newest(uid types.UID, queued versioned) (versioned, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	st, ok := m.statuses[uid]
	if !ok {
		return queued, false
	}
	if st.version < queued.version {
		return queued, true
	}
	return st, true
}
