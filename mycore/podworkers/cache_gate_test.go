package podworkers

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/kubelet"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
)

// recordingCache is a pod cache that never blocks: GetNewerThan records
// what it was asked and answers at once with the case's status and error.
type recordingCache struct {
	kubecontainer.Cache // nil: any other method panics, the gate needs none
	asked               []string
	status              *kubecontainer.PodStatus
	err                 error
}

func (c *recordingCache) GetNewerThan(uid types.UID, minTime time.Time) (*kubecontainer.PodStatus, error) {
	c.asked = append(c.asked, fmt.Sprintf("GetNewerThan(%s, %s)", uid, minTime.Format(time.TimeOnly)))
	return c.status, c.err
}

// TestPodCacheGate: what a pod worker reads from the pod cache before a
// sync, and when it does not sync at all — the gate of upstream's
// podWorkerLoop (pkg/kubelet/pod_workers.go:1273-1296, v1.36.3).
func TestPodCacheGate(t *testing.T) {
	pod := newPod("web", 30)
	last := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	fromPLEG := &kubecontainer.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	inspectErr := errors.New("rpc error: GetPodStatus: deadline exceeded")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	sync := kubelet.UpdatePodOptions{Pod: pod, UpdateType: kubetypes.SyncPodSync}
	runtimeKill := kubelet.UpdatePodOptions{UpdateType: kubetypes.SyncPodKill,
		RunningPod: &kubecontainer.Pod{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}}

	for _, tc := range []struct {
		name       string
		ctx        context.Context
		u          kubelet.UpdatePodOptions
		last       time.Time
		cacheErr   error
		wantAsked  string // the cache calls, "" for none
		wantStatus *kubecontainer.PodStatus
		wantErr    error
		why        string
	}{
		{name: "sync: the pod's status newer than the last sync", ctx: context.Background(), u: sync, last: last,
			wantAsked: "GetNewerThan(uid-web, 10:00:00)", wantStatus: fromPLEG,
			why: "the worker waits for GetNewerThan(pod UID, lastSyncTime) and syncs with the status it returns (pkg/kubelet/pod_workers.go:1288, v1.36.3)"},
		{name: "first sync: newer than the zero time", ctx: context.Background(), u: sync,
			wantAsked: "GetNewerThan(uid-web, 00:00:00)", wantStatus: fromPLEG,
			why: "lastSyncTime starts as the zero time (pkg/kubelet/pod_workers.go:1246, v1.36.3), so the first sync waits for the PLEG's first relist"},
		{name: "the PLEG could not inspect the pod: no sync", ctx: context.Background(), u: sync, last: last, cacheErr: inspectErr,
			wantAsked: "GetNewerThan(uid-web, 10:00:00)", wantErr: inspectErr,
			why: "an error stored in the cache is returned as it is, and there is no sync (pkg/kubelet/pod_workers.go:1290-1295, v1.36.3)"},
		{name: "a pod known only to the runtime: no wait", ctx: context.Background(), u: runtimeKill, last: last,
			wantAsked: "",
			why:       "a kill with RunningPod needs no status: the cache is not asked (pkg/kubelet/pod_workers.go:1276-1278, v1.36.3)"},
		{name: "a kill arrived while waiting: no sync with the stale update", ctx: cancelled, u: sync, last: last,
			wantAsked: "GetNewerThan(uid-web, 10:00:00)", wantErr: context.Canceled,
			why: "UpdatePod cancels the sync's context when termination is requested (pkg/kubelet/pod_workers.go:1000-1004, v1.36.3); the newer update is pending, so the gate returns ctx's error instead of the status"},
		{name: "a kill of a runtime pod, cancelled: no sync", ctx: cancelled, u: runtimeKill, last: last,
			wantAsked: "", wantErr: context.Canceled,
			why: "a cancelled context stops the sync of a RunningPod too (pkg/kubelet/pod_workers.go:1000-1004, v1.36.3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &recordingCache{status: fromPLEG, err: tc.cacheErr}
			w := &Workers{opts: Options{Cache: c}}
			status, err := w.podCacheGate(tc.ctx, tc.u, tc.last)
			asked := ""
			if len(c.asked) > 0 {
				asked = fmt.Sprint(c.asked)
				if len(c.asked) == 1 {
					asked = c.asked[0]
				}
			}
			if asked != tc.wantAsked {
				t.Errorf("podCacheGate asked the cache %q, want %q: %s", asked, tc.wantAsked, tc.why)
			}
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Errorf("podCacheGate returned error %v, want %v: %s", err, tc.wantErr, tc.why)
			}
			if tc.wantErr == nil && status != tc.wantStatus {
				t.Errorf("podCacheGate returned status %p, want the one the cache's GetNewerThan returned (%p): %s", status, tc.wantStatus, tc.why)
			}
		})
	}
}

// TestPodCacheGateBlocks: on the kubelet's own pod cache, the gate does not
// return while the cache knows nothing newer than the last sync, and
// returns once the PLEG's next relist moves the cache's time past it
// (cache.go:108-112 and :183-201, v1.36.3).
func TestPodCacheGateBlocks(t *testing.T) {
	pod := newPod("web", 30)
	cache := kubecontainer.NewCache()
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	cache.Set(pod.UID, &kubecontainer.PodStatus{ID: pod.UID}, nil, t0) // the relist before the last sync
	cache.UpdateTime(t0)
	w := &Workers{opts: Options{Cache: cache}}

	type result struct {
		status *kubecontainer.PodStatus
		err    error
	}
	done := make(chan result, 1)
	go func() {
		st, err := w.podCacheGate(context.Background(), kubelet.UpdatePodOptions{Pod: pod, UpdateType: kubetypes.SyncPodSync}, t0.Add(time.Second))
		done <- result{st, err}
	}()
	// No timing: whatever the gate has done so far, it must not have
	// returned a status as old as t0.
	select {
	case r := <-done:
		t.Fatalf("podCacheGate returned (%v, %v) although the cache had nothing newer than the last sync: the worker must block in GetNewerThan(pod UID, lastSyncTime) until the PLEG writes a newer state (pkg/kubelet/pod_workers.go:1288, v1.36.3)", r.status, r.err)
	default:
	}
	cache.UpdateTime(t0.Add(2 * time.Second)) // the next relist
	select {
	case r := <-done:
		if r.err != nil || r.status == nil || r.status.ID != pod.UID {
			t.Fatalf("after the next relist podCacheGate returned (%+v, %v), want the pod's status from the cache (pkg/kubelet/pod_workers.go:1288, v1.36.3)", r.status, r.err)
		}
	case <-time.After(patient):
		t.Fatalf("podCacheGate still blocked %s after the cache's time moved past lastSyncTime: GetNewerThan returns once the cache's global timestamp is newer (pkg/kubelet/container/cache.go:183-201, v1.36.3)", patient)
	}
}
