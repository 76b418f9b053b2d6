package status

import (
	v1 "k8s.io/api/core/v1"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	kubestatus "k8s.io/kubernetes/pkg/kubelet/status"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
	statusutil "k8s.io/kubernetes/pkg/util/pod"
)

// This file is the build-it stage status-can-be-deleted (make stage
// NAME=status-can-be-deleted): what the status manager posts when a pod
// ends, and when it may delete it; alone, so a learner's copy can replace
// it for a build without touching the rest of the package.

// canBeDeleted says whether the status manager may now delete pod from the
// apiserver for good (DELETE, grace 0, its UID as precondition): the
// kubelet's last word on a pod, after which kubectl no longer shows it
// Terminating. As upstream (canBeDeleted, pkg/kubelet/status/
// status_manager.go:1241-1258, v1.36.3), all of these must hold:
//
//   - pod is being deleted (a DeletionTimestamp) and is not a mirror pod
//     (kubetypes.IsMirrorPod: a mirror pod belongs to the mirror client);
//   - the apiserver already shows a terminal phase (pod.Status.Phase is
//     Succeeded or Failed, podutil.IsPodPhaseTerminal): pod is the
//     apiserver's copy, so this says the terminal status was posted first;
//   - TerminatePod was called for it (st.finished: SyncTerminatedPod is
//     done, no container will run again);
//   - and, ours on top of upstream: the pod workers (m.safety) say no
//     container of pod.UID could still run.
//
//stage:status-can-be-deleted
func (m *Manager) canBeDeleted(pod *v1.Pod, st versioned) bool {
	if pod.DeletionTimestamp == nil || kubetypes.IsMirrorPod(pod) {
		return false
	}
	if !podutil.IsPodPhaseTerminal(pod.Status.Phase) {
		return false
	}
	return st.finished && !m.safety.CouldHaveRunningContainers(pod.UID)
}

// mergePodStatus is the status the kubelet posts: its own status next,
// merged with old, the status the apiserver has now (mergePodStatus,
// pkg/kubelet/status/status_manager.go:1359-1434, v1.36.3). It must not
// write into next's or old's slices (GetPodStatus reads the cached status
// concurrently: work on next.DeepCopy()). The result is next, except:
//
//   - Conditions: first old's conditions the kubelet does not own
//     (!kubetypes.PodConditionByKubelet: a controller's or a readiness
//     gate's), then next's the kubelet owns, in their order. next's
//     DisruptionTarget (shared with the control plane) is added — replacing
//     one from old, statusutil.ReplaceOrAppendPodCondition — only with the
//     move to a terminal phase (old not terminal, next terminal) and when
//     no container could still run; its LastTransitionTime is set anew
//     then (updateLastTransitionTime), as the send was delayed. Other
//     conditions of next that the kubelet does not own are dropped.
//   - ResourceClaimStatuses, ExtendedResourceClaimStatus and
//     NodeAllocatableResourceClaimStatuses are old's: not the kubelet's.
//   - A move to a terminal phase is held back while
//     couldHaveRunningContainers: Phase, Reason and Message stay old's.
//     Other components free a pod's resources once it is terminal, so it
//     must really be over.
//   - A terminal result is never Ready (issue 108594): if its Ready or
//     ContainersReady condition is True, both become False with reason
//     PodFailed or PodCompleted (kubestatus's constants, by the phase) and
//     ObservedGeneration from podutil.CalculatePodConditionObservedGeneration
//     (old, pod.Generation, the condition's type), set with
//     podutil.UpdatePodCondition.
//
//stage:status-can-be-deleted
func mergePodStatus(pod *v1.Pod, old, next v1.PodStatus, couldHaveRunningContainers bool) v1.PodStatus {
	// next shares its slices with the cached status that GetPodStatus
	// copies under the read lock; this function writes into them
	// (updateLastTransitionTime), so it works on its own copy.
	next = *next.DeepCopy()
	conditions := make([]v1.PodCondition, 0, len(old.Conditions)+len(next.Conditions))
	for _, c := range old.Conditions {
		if !kubetypes.PodConditionByKubelet(c.Type) {
			conditions = append(conditions, c)
		}
	}
	toTerminal := !podutil.IsPodPhaseTerminal(old.Phase) && podutil.IsPodPhaseTerminal(next.Phase)
	for _, c := range next.Conditions {
		switch {
		case kubetypes.PodConditionByKubelet(c.Type):
			conditions = append(conditions, c)
		case c.Type == v1.DisruptionTarget && toTerminal && !couldHaveRunningContainers:
			// Shared with the control plane: sent only with the terminal phase.
			updateLastTransitionTime(&next, &old, c.Type)
			if _, nc := podutil.GetPodConditionFromList(next.Conditions, c.Type); nc != nil {
				conditions = statusutil.ReplaceOrAppendPodCondition(conditions, nc)
			}
		}
	}
	next.Conditions = conditions
	next.ResourceClaimStatuses = old.ResourceClaimStatuses
	next.ExtendedResourceClaimStatus = old.ExtendedResourceClaimStatus
	next.NodeAllocatableResourceClaimStatuses = old.NodeAllocatableResourceClaimStatuses
	if toTerminal && couldHaveRunningContainers {
		next.Phase, next.Reason, next.Message = old.Phase, old.Reason, old.Message
	}
	// A terminal pod is never Ready (issue 108594).
	if podutil.IsPodPhaseTerminal(next.Phase) && (podutil.IsPodReadyConditionTrue(next) || podutil.IsContainersReadyConditionTrue(next)) {
		reason := kubestatus.PodFailed
		if next.Phase == v1.PodSucceeded {
			reason = kubestatus.PodCompleted
		}
		for _, t := range []v1.PodConditionType{v1.ContainersReady, v1.PodReady} {
			c := v1.PodCondition{Type: t, Status: v1.ConditionFalse, Reason: reason,
				ObservedGeneration: podutil.CalculatePodConditionObservedGeneration(&old, pod.Generation, t)}
			podutil.UpdatePodCondition(&next, &c)
		}
	}
	return next
}
