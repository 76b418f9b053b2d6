package main

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The resume check: done only when the Lease was renewed after the first
// NodeNotReady — a heartbeat that never came back is "not yet".
func TestLab02ResumedNeedsARenewalAfterTheFirstNotReady(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 4, 16, 17, 0, time.UTC)
	events := []v1.Event{
		{FirstTimestamp: metav1.NewTime(t0.Add(time.Minute))}, // the one after the lab ended
		{FirstTimestamp: metav1.NewTime(t0)},                  // the demo's
	}
	if got := lab02FirstEvent(events); !got.Equal(t0) {
		t.Fatalf("first event %s, want %s", got, t0)
	}
	lease := func(renewed time.Time) *coordinationv1.Lease {
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: renewed}}}
	}
	for _, tc := range []struct {
		renewed time.Time
		done    bool
	}{
		{t0.Add(-5 * time.Second), false}, // stopped for good before the controller noticed
		{t0.Add(10 * time.Second), true},  // resumed
	} {
		if r := lab02Resumed(events, lease(tc.renewed), "run"); r.Done != tc.done {
			t.Errorf("renewed at %s: %+v, want done=%v", tc.renewed.Format("15:04:05"), r, tc.done)
		}
	}
	if r := lab02Resumed(nil, lease(t0), "run"); r.Done {
		t.Errorf("no NodeNotReady event: %+v, want not yet", r)
	}
}
