package lease

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// This file is the lease-renew build-it stage: one step of the renewal
// loop, as upstream's lease controller takes it (k8s.io/component-helpers
// v0.36.3 apimachinery/lease/controller.go:151-263). The rest of the
// Renewer (its fields, Run, newLease) is in renewer.go.

// sync is one renewal: one tick of the loop (controller.go:151-182).
//
// When the Renewer has a latestLease (the answer of its last write), it
// renews that one with retryUpdateLease — no GET — and is done when that
// succeeds. Otherwise, or when that failed, it makes sure the Lease exists
// with backoffEnsureLease, remembers the result in r.latestLease, and
// renews it with retryUpdateLease — unless ensuring just created it (a new
// Lease is already fresh) or came back with none (ctx was cancelled).
// Errors are not returned: the next tick tries again.
//
//stage:lease-renew
func (r *Renewer) sync(ctx context.Context) {
	if r.latestLease != nil {
		if err := r.retryUpdateLease(ctx, r.latestLease); err == nil {
			return
		}
	}
	l, created := r.backoffEnsureLease(ctx)
	r.latestLease = l
	if !created && l != nil {
		_ = r.retryUpdateLease(ctx, l)
	}
}

// backoffEnsureLease calls ensureLease until it succeeds, and returns its
// Lease and whether it created it (controller.go:188-210). After each
// failure it waits on r.clock — never time.After, so tests can drive it —
// 200 ms, then 400 ms, 800 ms …, doubling from firstBackoff and capped at
// maxBackoff. If ctx is cancelled during a wait it returns (nil, false).
//
//stage:lease-renew
func (r *Renewer) backoffEnsureLease(ctx context.Context) (*coordinationv1.Lease, bool) {
	sleep := firstBackoff
	for {
		l, created, err := r.ensureLease(ctx)
		if err == nil {
			return l, created
		}
		sleep = min(2*sleep, maxBackoff)
		select {
		case <-ctx.Done():
			return nil, false
		case <-r.clock.After(sleep):
		}
	}
}

// ensureLease GETs the node's Lease (name r.nodeName) and returns it with
// created=false. When the GET answers NotFound it CREATEs a new one built
// by r.newLease(nil) and returns the created Lease with created=true
// (controller.go:214-236). Any other GET error, or a CREATE error, is
// returned. If newLease fails (the Node to own the Lease cannot be read)
// it creates nothing and returns (nil, false, nil): the next tick retries.
//
//stage:lease-renew
func (r *Renewer) ensureLease(ctx context.Context) (*coordinationv1.Lease, bool, error) {
	l, err := r.leases.Get(ctx, r.nodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		fresh, err := r.newLease(nil)
		if err != nil {
			return nil, false, nil
		}
		l, err := r.leases.Create(ctx, fresh, metav1.CreateOptions{})
		if err != nil {
			return nil, false, err
		}
		return l, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	return l, false, nil
}

// retryUpdateLease UPDATEs the Lease built by r.newLease(base) up to
// maxUpdateRetries times in a row, with no wait between tries
// (controller.go:240-263). A success stores the answer in r.latestLease
// and returns nil. A 409 Conflict means base is stale: fetch the current
// one with backoffEnsureLease and try again with it. From the second
// failure on (not after the first), each failure calls r.onRepeatedFail
// when it is set — the kubelet closes its connections there. After the
// last try it returns an error saying how many attempts failed.
//
//stage:lease-renew
func (r *Renewer) retryUpdateLease(ctx context.Context, base *coordinationv1.Lease) error {
	for i := 0; i < maxUpdateRetries; i++ {
		next, err := r.newLease(base)
		if err == nil {
			updated, err := r.leases.Update(ctx, next, metav1.UpdateOptions{})
			if err == nil {
				r.latestLease = updated
				return nil
			}
			if apierrors.IsConflict(err) {
				base, _ = r.backoffEnsureLease(ctx)
				continue
			}
		}
		if i > 0 && r.onRepeatedFail != nil {
			r.onRepeatedFail()
		}
	}
	return fmt.Errorf("failed %d attempts to update lease", maxUpdateRetries)
}
