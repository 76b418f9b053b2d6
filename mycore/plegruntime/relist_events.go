package plegruntime

import (
	"k8s.io/apimachinery/pkg/types"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/pleg"
)

// This file is the build-it stage pleg-relist (make stage
// NAME=pleg-relist): the heart of the PLEG's relist, which the course
// otherwise imports (pleg.NewGenericPLEG), written out so a learner can
// write it. The tests hold it to the kubelet's own PLEG, relisting the
// same pods.

// RelistEvents is what one relist finds changed in one pod: old is the pod
// as the previous relist saw it, cur as this one sees it (either nil when
// the runtime had no sandbox or container of the pod then). It is the diff
// of upstream's generic PLEG (reconcilePodRecord, pkg/kubelet/pleg/
// generic.go:336-346, v1.36.3, with getContainersFromPods :454-478,
// computeEvents :480-490 and generateEvents :252-276):
//
//   - Every container and every sandbox (the PLEG treats sandboxes as
//     containers) of old and of cur is looked at once, by its ID.ID, in
//     this order: old's containers, old's sandboxes, then cur's containers
//     and cur's sandboxes not seen yet.
//   - Its state in each pod is one of the PLEG's four: "running"
//     (kubecontainer.ContainerStateRunning), "exited" (ContainerStateExited),
//     "unknown" (ContainerStateCreated or ContainerStateUnknown: the
//     kubelet does not act on created), or "non-existent" (not in that pod,
//     or the pod is nil).
//   - Same state: no event. Otherwise, by the new state: running →
//     ContainerStarted; exited → ContainerDied; unknown → ContainerChanged;
//     non-existent → ContainerRemoved if it was exited before (its death
//     was reported already), else ContainerDied then ContainerRemoved.
//   - Each event has ID the pod's UID (old's, else cur's) and Data the
//     container's ID.ID string.
//
// The PLEG then drops ContainerChanged when it sends the events
// (generic.go:391-394); RelistEvents returns it.
//
//stage:pleg-relist
func RelistEvents(old, cur *kubecontainer.Pod) []*pleg.PodLifecycleEvent {
	var uid types.UID
	switch {
	case old != nil:
		uid = old.ID
	case cur != nil:
		uid = cur.ID
	}
	seen := map[string]bool{}
	var events []*pleg.PodLifecycleEvent
	for _, p := range []*kubecontainer.Pod{old, cur} {
		if p == nil {
			continue
		}
		for _, list := range [][]*kubecontainer.Container{p.Containers, p.Sandboxes} {
			for _, c := range list {
				id := c.ID.ID
				if seen[id] {
					continue
				}
				seen[id] = true
				events = append(events, containerEvents(uid, id, plegState(old, c.ID), plegState(cur, c.ID))...)
			}
		}
	}
	return events
}

// containerEvents is generateEvents (generic.go:252-276): the events for
// one container that went from oldState to newState.
//
//stage:pleg-relist
func containerEvents(uid types.UID, id, oldState, newState string) []*pleg.PodLifecycleEvent {
	if oldState == newState {
		return nil
	}
	ev := func(t pleg.PodLifeCycleEventType) *pleg.PodLifecycleEvent {
		return &pleg.PodLifecycleEvent{ID: uid, Type: t, Data: id}
	}
	switch newState {
	case "running":
		return []*pleg.PodLifecycleEvent{ev(pleg.ContainerStarted)}
	case "exited":
		return []*pleg.PodLifecycleEvent{ev(pleg.ContainerDied)}
	case "unknown":
		return []*pleg.PodLifecycleEvent{ev(pleg.ContainerChanged)}
	}
	if oldState == "exited" {
		return []*pleg.PodLifecycleEvent{ev(pleg.ContainerRemoved)}
	}
	return []*pleg.PodLifecycleEvent{ev(pleg.ContainerDied), ev(pleg.ContainerRemoved)}
}

// plegState is getContainerState and convertState (generic.go:585-602,
// :102-117): a container's or sandbox's state in pod, in the PLEG's words.
// Upstream panics on a state it does not know; here that is "unknown".
//
//stage:pleg-relist
func plegState(pod *kubecontainer.Pod, id kubecontainer.ContainerID) string {
	if pod == nil {
		return "non-existent"
	}
	c := pod.FindContainerByID(id)
	if c == nil {
		c = pod.FindSandboxByID(id)
	}
	if c == nil {
		return "non-existent"
	}
	switch c.State {
	case kubecontainer.ContainerStateRunning:
		return "running"
	case kubecontainer.ContainerStateExited:
		return "exited"
	}
	return "unknown"
}
