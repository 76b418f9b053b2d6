package mykubelet

import (
	"context"

	v1 "k8s.io/api/core/v1"
)

// What the kubelet writes into a pod it stopped at its deadline
// (active_deadline.go:30-33, v1.36.3).
const (
	DeadlineReason  = "DeadlineExceeded"
	DeadlineMessage = "Pod was active on the node longer than the specified deadline"
)

// pastActiveDeadline reports whether the pod has been active on the node
// for its spec.activeDeadlineSeconds or longer — upstream's
// activeDeadlineHandler (pkg/kubelet/active_deadline.go), which reads the
// time from the kubelet's clock: here k.clock (Options.Clock), which a
// test steps instead of waiting. Lab 18's exercise: today no pod ever is.
func (k *Kubelet) pastActiveDeadline(pod *v1.Pod) bool {
	return false
}

// evictPastDeadline is generateAPIPodStatus's PodSyncHandlers loop
// (kubelet_pods.go:1931-1937): a pod past its deadline is Failed with
// reason DeadlineExceeded, and SyncPod, seeing a terminal phase, hands it
// to the workers to stop.
func (k *Kubelet) evictPastDeadline(pod *v1.Pod, st *v1.PodStatus) {
	if k.pastActiveDeadline(pod) {
		st.Phase = v1.PodFailed
		st.Reason = DeadlineReason
		st.Message = DeadlineMessage
	}
}

// syncPastDeadline is getPodsToSync's PodSyncLoopHandlers (kubelet.go:2539):
// at each housekeeping tick a running pod past its deadline is synced now,
// not at its next resync a minute later.
func (k *Kubelet) syncPastDeadline(ctx context.Context) {
	var due []*v1.Pod
	for _, pod := range k.pods.GetPods() {
		// No deadline, nothing to read (upstream's pastActiveDeadline
		// asks first too, active_deadline.go:80-83): each read of the
		// status manager is a copy, and a fleet makes 10,000 a second.
		if pod.Spec.ActiveDeadlineSeconds == nil {
			continue
		}
		if st, ok := k.status.GetPodStatus(pod.UID); ok && (st.Phase == v1.PodFailed || st.Phase == v1.PodSucceeded) {
			continue
		}
		if k.pastActiveDeadline(pod) {
			due = append(due, pod)
		}
	}
	if len(due) > 0 {
		k.HandlePodSyncs(ctx, due)
	}
}
