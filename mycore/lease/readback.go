package lease

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"
)

// The upstream controller renews optimistically: it PUTs the Lease it
// wrote last, with that write's resourceVersion, and reads the Lease only
// after a 409 Conflict (component-helpers v0.36.3, apimachinery/lease/
// controller.go:159-172 and :246-255). A renewal whose answer was lost —
// the heartbeat client's 10 s timeout on an overloaded apiserver — may
// still have been applied; the controller retries at once with the old
// resourceVersion, and that retry is a 409 (then a GET, then the PUT).
//
// readBackClient is a measured departure for fleet mode, where a thousand
// nodes on one apiserver meet exactly that: after an update whose outcome
// is unknown it reads the Lease first and, if it is still this node's,
// updates from what it read. A GET instead of a 409 and a GET: no conflict,
// one request fewer. Every other call is the controller's own.
//
// It waits readBackDelay before that read. A request whose answer the
// client gave up on is not withdrawn: the apiserver may be writing it to
// etcd still, and a read made at once can come before that write: our
// retry lands first, and the lost write, landing after it with the old
// resourceVersion, is answered 409 — to no one, but counted by the
// apiserver. Two seconds of a 40-second lease; with the wait, no Lease
// met a 409 in a quiet 3-round benchmark (lab 18's README).
type readBackClient struct {
	kubernetes.Interface
	*readBack
}

// readBack is the state the client's views share.
type readBack struct {
	lastUnknown atomic.Bool // the previous update's outcome is unknown
	clock       clock.Clock
	delay       time.Duration
}

// readBackDelay: how long a read-back waits for a lost write to land.
const readBackDelay = 2 * time.Second

func newReadBackClient(c kubernetes.Interface, clk clock.Clock) kubernetes.Interface {
	return readBackClient{Interface: c, readBack: &readBack{clock: clk, delay: readBackDelay}}
}

func (c readBackClient) CoordinationV1() coordinationv1client.CoordinationV1Interface {
	return readBackCoordination{CoordinationV1Interface: c.Interface.CoordinationV1(), readBack: c.readBack}
}

type readBackCoordination struct {
	coordinationv1client.CoordinationV1Interface
	*readBack
}

func (c readBackCoordination) Leases(namespace string) coordinationv1client.LeaseInterface {
	return readBackLeases{LeaseInterface: c.CoordinationV1Interface.Leases(namespace), readBack: c.readBack}
}

type readBackLeases struct {
	coordinationv1client.LeaseInterface
	*readBack
}

func (l readBackLeases) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if l.lastUnknown.Load() {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-l.clock.After(l.delay):
		}
		current, err := l.Get(ctx, lease.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err // still unknown: the next try reads again
		}
		if holder := current.Spec.HolderIdentity; holder != nil && lease.Spec.HolderIdentity != nil && *holder == *lease.Spec.HolderIdentity {
			lease = lease.DeepCopy()
			lease.ResourceVersion = current.ResourceVersion
		}
		// Someone else holds it: update with our version and let the
		// apiserver answer 409, as the controller expects.
	}
	written, err := l.LeaseInterface.Update(ctx, lease, opts)
	l.lastUnknown.Store(outcomeUnknown(err))
	return written, err
}

// outcomeUnknown: the request may have been applied. An answer from the
// apiserver that it refused (a conflict, forbidden, 429, invalid …) says
// it was not; no answer at all (a client timeout, a broken connection) or
// the apiserver's own timeout does not.
func outcomeUnknown(err error) bool {
	if err == nil {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true
	}
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsInternalError(err)
}
