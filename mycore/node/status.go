package node

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	nodeutil "k8s.io/component-helpers/node/util"
)

// The kubelet's defaults (KubeletConfiguration): look at the node status
// every 10 s, but write it only when it changed or every 5 minutes. Between
// reports, the Lease is the heartbeat.
const (
	DefaultStatusUpdateFrequency = 10 * time.Second
	DefaultStatusReportFrequency = 5 * time.Minute
)

// StatusReporter keeps the Node's status current: the kubelet's
// syncNodeStatus / tryUpdateNodeStatus (kubelet_node_status.go, v1.36.3).
type StatusReporter struct {
	Client kubernetes.Interface // as the node
	Node   Config
	// UpdateFrequency, ReportFrequency default to the kubelet's 10 s and 5 min.
	UpdateFrequency, ReportFrequency time.Duration
	// Log receives failures and retries (nil: silent).
	Log func(format string, args ...any)
	// OnPatched is told about every status write.
	OnPatched func(n *v1.Node)
	// Get reads the Node before each sync; nil: a GET from the apiserver.
	// Many nodes in one process read one shared Node informer's cache
	// instead (a stale copy only delays a patch to the next sync).
	Get func(ctx context.Context, name string) (*v1.Node, error)

	mu         sync.Mutex
	lastReport time.Time
	delay      time.Duration // added to ReportFrequency, see Sync
}

// Sync reads the Node, applies our status setters and patches the status if
// something changed or the report period is over. It returns whether it
// wrote. The write is a strategic merge patch of the status subresource made
// by nodeutil.PatchNodeStatus, as the kubelet's patchNodeStatus does: the
// conditions list merges by type, so other writers' conditions survive.
func (r *StatusReporter) Sync(ctx context.Context) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	get := r.Get
	if get == nil {
		get = func(ctx context.Context, name string) (*v1.Node, error) {
			return r.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		}
	}
	original, err := get(ctx, r.Node.Name)
	if err != nil {
		return false, fmt.Errorf("get node %s: %w", r.Node.Name, err)
	}
	now := time.Now()
	updated := original.DeepCopy()
	r.Node.SetStatus(updated, now)
	report := r.ReportFrequency
	if report == 0 {
		report = DefaultStatusReportFrequency
	}
	changed := statusChanged(&original.Status, &updated.Status)
	if !changed && now.Sub(r.lastReport) < report+r.delay {
		return false, nil
	}
	// As the kubelet (kubelet_node_status.go:520-545): after a change or
	// the first report, the next periodic one comes at a random point
	// between half and one and a half periods, so that nodes started
	// together do not all report at once every 5 minutes; after a
	// periodic one, a period later.
	if changed || r.lastReport.IsZero() {
		r.delay = time.Duration(float64(report) * (rand.Float64() - 0.5))
	} else {
		r.delay = 0
	}
	patched, _, err := nodeutil.PatchNodeStatus(r.Client.CoreV1(), types.NodeName(r.Node.Name), original, updated)
	if err != nil {
		return false, err
	}
	r.lastReport = now
	if r.OnPatched != nil {
		r.OnPatched(patched)
	}
	return true, nil
}

// Run syncs at once, then every UpdateFrequency, until ctx ends. A failure
// is logged and retried with backoff (200 ms doubling to 7 s, like the
// lease controller), never fatal: a kubelet that exits on one failed
// heartbeat turns a blip of the apiserver into a NotReady node.
func (r *StatusReporter) Run(ctx context.Context) {
	every := r.UpdateFrequency
	if every == 0 {
		every = DefaultStatusUpdateFrequency
	}
	backoff := time.Duration(0)
	for {
		delay := every
		if _, err := r.Sync(ctx); err != nil && ctx.Err() == nil {
			backoff = min(max(2*backoff, 200*time.Millisecond), 7*time.Second)
			delay = min(backoff, every)
			if r.Log != nil {
				r.Log("node status update failed, retrying in %s: %v", delay, err)
			}
		} else {
			backoff = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// statusChanged is the kubelet's nodeStatusHasChanged: any difference
// except the conditions' heartbeat times.
func statusChanged(a, b *v1.NodeStatus) bool {
	if len(a.Conditions) != len(b.Conditions) {
		return true
	}
	for i := range b.Conditions {
		bc := b.Conditions[i]
		ac := GetCondition(a, bc.Type)
		if ac == nil || ac.Status != bc.Status || ac.Reason != bc.Reason || ac.Message != bc.Message || !ac.LastTransitionTime.Equal(&bc.LastTransitionTime) {
			return true
		}
	}
	ac, bc := a.DeepCopy(), b.DeepCopy()
	ac.Conditions, bc.Conditions = nil, nil
	return !equality.Semantic.DeepEqual(ac, bc) // Semantic: quantities compare by value
}
