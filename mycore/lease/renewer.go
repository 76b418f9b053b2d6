package lease

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// The upstream controller's limits (k8s.io/component-helpers v0.36.3
// apimachinery/lease/controller.go:38-45).
const (
	// maxUpdateRetries: a failed update is retried at once this many times
	// in all, before the loop waits for the next interval.
	maxUpdateRetries = 5
	// firstBackoff is doubled before the first wait: get/create failures
	// wait 200 ms, 400 ms, 800 ms … (controller.go:194,200).
	firstBackoff = 100 * time.Millisecond
	// maxBackoff caps the get/create back-off.
	maxBackoff = 7 * time.Second
	// renewJitter is the loop's jitter factor (controller.go:148).
	renewJitter = 0.04
)

// Renewer is our own copy of the upstream lease controller
// (k8s.io/component-helpers v0.36.3 apimachinery/lease/controller.go),
// the same requests in the same order, with one difference: every wait —
// the renew interval and the get/create back-off — is on the injected
// clock, where upstream's are on the real one (wait.JitterUntil and
// time.After, controller.go:148,206). That is what lets a unit test drive
// a renewal step by step; it is also the code of the lease-renew build-it
// stage (renew_step.go). NewController still runs upstream's controller:
// the labs heartbeat with the kubelet's own code.
type Renewer struct {
	leases         coordclient.LeaseInterface
	nodeName       string
	leaseDuration  int32
	renewInterval  time.Duration
	clock          clock.Clock
	onRepeatedFail func()
	// postProcess is the kubelet's SetNodeOwnerFunc; an error blocks a
	// create (controller.go:218-224).
	postProcess func(*coordinationv1.Lease) error

	// latestLease is the Lease as the last successful write returned it:
	// the next renewal updates it without a GET (controller.go:159-172).
	latestLease *coordinationv1.Lease
}

// NewRenewer builds a Renewer for c's node, with the arguments
// NewController gives upstream's controller. Its Run is not safe to call
// twice at once (upstream serialises sync with a mutex; one loop needs none).
func NewRenewer(ctx context.Context, c Config) (*Renewer, error) {
	if c.Client == nil || c.NodeName == "" {
		return nil, fmt.Errorf("lease: Client and NodeName are required")
	}
	leaseDur, renew, err := c.Durations()
	if err != nil {
		return nil, err
	}
	clk := c.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Renewer{
		leases:         c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease),
		nodeName:       c.NodeName,
		leaseDuration:  int32(leaseDur / time.Second),
		renewInterval:  renew,
		clock:          clk,
		onRepeatedFail: c.OnRepeatedFailure,
		postProcess:    setNodeOwner(ctx, c.Client, c.NodeName),
	}, nil
}

// Run renews until ctx is cancelled: one sync, then the renew interval
// with 4 % jitter counted from its end, as wait.JitterUntilWithContext
// with sliding=true does (controller.go:148).
func (r *Renewer) Run(ctx context.Context) {
	for ctx.Err() == nil {
		r.sync(ctx)
		select {
		case <-ctx.Done():
		case <-r.clock.After(wait.Jitter(r.renewInterval, renewJitter)):
		}
	}
}

// newLease is upstream's newLease (controller.go:269-296): a fresh Lease
// held by the node when base is nil, else a copy of base; either way with
// the current duration and renewTime = now on the injected clock, then
// the owner reference. The Lease is returned even with the error.
func (r *Renewer) newLease(base *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	var l *coordinationv1.Lease
	if base == nil {
		l = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: r.nodeName, Namespace: corev1.NamespaceNodeLease},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(r.nodeName)},
		}
	} else {
		l = base.DeepCopy()
	}
	l.Spec.LeaseDurationSeconds = ptr.To(r.leaseDuration)
	l.Spec.RenewTime = &metav1.MicroTime{Time: r.clock.Now()}
	if r.postProcess != nil {
		return l, r.postProcess(l)
	}
	return l, nil
}
