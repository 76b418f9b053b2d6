package mykubelet

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/mycore/journal"
	"kubelet-labs/mycore/kuberuntime"
	"kubelet-labs/mycore/podworkers"
	"kubelet-labs/mycore/status"
)

// syncer is the pod workers' Syncer: the kubelet's SyncPod,
// SyncTerminatingPod, SyncTerminatingRuntimePod and SyncTerminatedPod
// (kubelet.go:2019, :2289, :2426, :2458) with what our node has — no
// cgroups.
type syncer struct{ k *Kubelet }

var _ podworkers.Syncer = (*syncer)(nil)

// SyncPod: report the status the runtime shows, stop if the pod is over,
// else make the runtime match the spec. The status is computed from the
// pod cache before acting (kubelet.go:2066-2112): what is posted is always
// what was observed, never what was just asked for; the PLEG sees the
// result and triggers the next sync.
func (s *syncer) SyncPod(ctx context.Context, updateType kubetypes.SyncPodType, pod, mirrorPod *v1.Pod, podStatus *kubecontainer.PodStatus) (bool, func(), error) {
	k := s.k
	api := k.generateStatus(pod, podStatus, false)
	k.status.SetPodStatus(pod, api)
	if api.Phase == v1.PodSucceeded || api.Phase == v1.PodFailed {
		k.say(journal.Sync, pod, "SyncPod", "sync    SyncPod(%s) %s: phase %s → terminal", updateType, klog.KObj(pod), api.Phase)
		return true, nil, nil
	}
	k.say(journal.Sync, pod, "SyncPod", "sync    SyncPod(%s) %s: phase %s, %s", updateType, klog.KObj(pod), api.Phase, describe(podStatus))
	// A static pod needs its mirror pod, matching (kubelet.go:2185-2186).
	k.reconcileMirrorPod(ctx, pod, mirrorPod)
	// Every probe of the pod gets its worker (kubelet.go:2214); AddPod
	// leaves existing ones alone.
	k.probes.AddPod(pod)
	// Not cancelled with the sync (kubelet.go:2216-2222): the workers
	// cancel a sync when the pod starts terminating, and a CRI call cut off
	// client-side leaves the runtime finishing it alone — a container
	// started after the kill that should have stopped it. The runtime's
	// part of the sync always runs to its end; the CRI calls have their
	// own timeouts.
	// Volumes first: no container starts without them (volumes.go).
	if err := k.setUpVolumes(pod); err != nil {
		return false, nil, err
	}
	result := k.manager.SyncPod(context.WithoutCancel(ctx), pod, withStatusIPs(podStatus, api), k.nodeInfo(), k.backOff)
	if k.reasons.update(pod.UID, result) {
		// A start failed or waits behind the back-off: show it now
		// (Waiting, CrashLoopBackOff), not at the next sync. Upstream's
		// next sync comes 10 s after an error (backOffPeriod,
		// pod_workers.go), ours only when the back-off expires — the
		// reason would otherwise be visible for a moment at the start of
		// that sync and then replaced by the restarted container.
		k.status.SetPodStatus(pod, k.generateStatus(pod, podStatus, false))
	}
	err := result.Error()
	if err != nil {
		// A crash-loop back-off is an error carrying its expiry
		// (kubecontainer.BackoffError): the workers retry exactly then
		// (pod_workers.go:1539), or earlier if the PLEG reports a change.
		k.say(journal.Sync, pod, "SyncPod", "sync    %s: %v", klog.KObj(pod), err)
	}
	// Something was started or stopped: relist this pod now rather than at
	// the next periodic relist, so its status catches up in milliseconds,
	// not up to RelistPeriod later (kubelet.go:2270-2275, the
	// PLEGOnDemandRelist feature, beta and on by default in 1.36).
	// A resize in place changes no container's state, so the relist would
	// see nothing to inspect: ask for the pod's status anew, to see the new
	// resources (generic.go:348-382, PodSync).
	var postSync func()
	if len(result.SyncResults) > 0 && err == nil {
		resized := resizedInPlace(result)
		postSync = func() {
			if resized {
				k.pleg.RequestReinspect(pod.UID)
			}
			k.pleg.RequestRelist(pod.UID)
		}
	}
	return false, postSync, err
}

// SyncTerminatingPod: post the status, stop every container with the
// grace period the workers decided, check nothing runs, post the terminal
// status (kubelet.go:2289-2420).
func (s *syncer) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus, gracePeriod *int64, podStatusFn func(*v1.PodStatus)) error {
	k := s.k
	api := k.generateStatus(pod, podStatus, false)
	if podStatusFn != nil {
		podStatusFn(&api)
	}
	k.status.SetPodStatus(pod, api)
	grace := "the pod's own"
	if gracePeriod != nil {
		grace = fmt.Sprintf("%ds", *gracePeriod)
	}
	k.say(journal.Sync, pod, "SyncTerminatingPod", "sync    SyncTerminatingPod %s: stop it, grace %s", klog.KObj(pod), grace)
	// No probe may restart a container that is being stopped (:2323).
	k.probes.StopLivenessAndStartup(pod)
	running := kubecontainer.ConvertPodStatusToRunningPod(k.runtime.Type(), podStatus)
	if err := k.killPod(ctx, pod, running, gracePeriod); err != nil {
		return fmt.Errorf("error killing terminating pod: %w", err)
	}
	// Stopped: readiness has nothing left to probe (:2336).
	k.probes.RemovePod(pod)
	// Ask the runtime again, not the cache: the kill just changed it (:2335-2370).
	// A pod that never got a sandbox (or whose sandboxes are gone) has
	// nothing left to stop: an empty runtime pod, not an error that the
	// worker would retry forever (:2343-2352).
	rp, err := k.runtime.GetPod(ctx, pod.UID)
	if errors.Is(err, kubecontainer.ErrPodNotFound) {
		rp, err = &kubecontainer.Pod{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace, Timestamp: k.clock.Now()}, nil
	}
	if err != nil {
		return fmt.Errorf("unable to get pod prior to final pod termination: %w", err)
	}
	stopped, err := k.runtime.GetPodStatus(ctx, rp)
	if err != nil {
		return err
	}
	// A stopped sandbox has no IPs any more, but the pod keeps its IP in
	// the API until it is gone (preserveDataFromBeforeStopping,
	// kubelet.go:2361, :2415-2417). Without this, the terminal status
	// would clear status.podIP(s), and SyncTerminatedPod — from the pod
	// cache, where the PLEG keeps the last IPs of a pod with no ready
	// sandbox (pleg/generic.go:494-514) — would put them back: one more
	// PATCH per deleted pod, and an IP that blinks out (issue 41).
	stopped.IPs = podStatus.IPs
	for _, c := range stopped.ContainerStatuses {
		if c.State == kubecontainer.ContainerStateRunning {
			return fmt.Errorf("container %s still runs after KillPod", c.Name)
		}
	}
	k.status.SetPodStatus(pod, k.generateStatus(pod, stopped, true))
	return nil
}

// SyncTerminatingRuntimePod stops a pod the runtime has and the config
// does not, with grace 1 s as the kubelet does (kubelet.go:2426-2456).
func (s *syncer) SyncTerminatingRuntimePod(ctx context.Context, rp *kubecontainer.Pod) error {
	s.k.sayPod(journal.Sync, rp.Namespace, rp.Name, rp.ID, "SyncTerminatingRuntimePod", "sync    SyncTerminatingRuntimePod %s/%s: %d container(s) of a pod the config no longer has → stop, grace 1s", rp.Namespace, rp.Name, len(rp.Containers))
	one := int64(1)
	return s.k.killPod(ctx, nil, *rp, &one)
}

// SyncTerminatedPod: the final status, and TerminatePod, which lets the
// status manager delete the pod object once it is safe (kubelet.go:2458).
// Dead containers and sandboxes stay for the garbage collector.
func (s *syncer) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus) error {
	k := s.k
	// Its volumes go before the pod is reported terminated (volumes.go).
	if err := k.tearDownVolumes(pod.UID); err != nil {
		return fmt.Errorf("tear down the volumes of %s: %w", klog.KObj(pod), err)
	}
	k.status.SetPodStatus(pod, k.generateStatus(pod, podStatus, true))
	k.status.TerminatePod(pod)
	k.say(journal.Sync, pod, "SyncTerminatedPod", "sync    SyncTerminatedPod %s: final status posted", klog.KObj(pod))
	return nil
}

// generateStatus is generateAPIPodStatus (kubelet_pods.go) plus the
// reason cache: a container that is not running and has a reason (back-off,
// a failed start) shows Waiting with it, its last exit moved to
// lastState, as convertToAPIContainerStatuses does.
func (k *Kubelet) generateStatus(pod *v1.Pod, podStatus *kubecontainer.PodStatus, terminal bool) v1.PodStatus {
	old, ok := k.status.GetPodStatus(pod.UID)
	if !ok {
		old = pod.Status
	}
	st := status.Generate(pod, podStatus, old, terminal, status.GenerateOptions{HostIPs: k.o.HostIPs, Probes: k.probes})
	k.evictPastDeadline(pod, &st) // deadline.go
	if terminal {
		return st
	}
	// A resize the containers do not have yet (kubelet.go:2059-2072; the
	// condition goes when they do, and mergePodStatus removes it from the
	// apiserver's copy, the kubelet owning it).
	if k.manager.ResizeInProgress(pod, podStatus) {
		st.Conditions = append(st.Conditions, v1.PodCondition{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue,
			ObservedGeneration: pod.Generation, LastTransitionTime: metav1.Now()})
	}
	// the last start failure of each container, init containers too
	// (convertToAPIContainerStatuses, which makes both, reads the reason
	// cache at kubelet_pods.go:2731; kubectl shows Init:ErrImagePull from it)
	for _, cs := range append(pointers(st.InitContainerStatuses), pointers(st.ContainerStatuses)...) {
		if cs.State.Running != nil {
			continue
		}
		r, ok := k.reasons.get(pod.UID, cs.Name)
		if !ok {
			continue
		}
		if cs.State.Terminated != nil {
			cs.LastTerminationState = cs.State
		}
		cs.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: r.reason, Message: r.message}}
	}
	return st
}

// pointers points at each status of statuses.
func pointers(statuses []v1.ContainerStatus) []*v1.ContainerStatus {
	out := make([]*v1.ContainerStatus, len(statuses))
	for i := range statuses {
		out[i] = &statuses[i]
	}
	return out
}

func (k *Kubelet) nodeInfo() kuberuntime.PodIPs {
	n := kuberuntime.PodIPs{NodeName: k.o.NodeName, HostIPs: k.o.HostIPs}
	if len(k.o.HostIPs) > 0 {
		n.HostIP = k.o.HostIPs[0]
	}
	return n
}

// resizedInPlace: the sync updated a container's resources where it runs.
func resizedInPlace(r kubecontainer.PodSyncResult) bool {
	for _, s := range r.SyncResults {
		if s.Action == kubecontainer.ResizePodInPlace && s.Error == nil {
			return true
		}
	}
	return false
}

// describe is one line of what the pod cache says.
func describe(ps *kubecontainer.PodStatus) string {
	if len(ps.SandboxStatuses) == 0 {
		return "no sandbox yet"
	}
	s := fmt.Sprintf("%d sandbox(es), IPs %v", len(ps.SandboxStatuses), ps.IPs)
	for _, c := range ps.ContainerStatuses {
		s += fmt.Sprintf(", %s=%s", c.Name, c.State)
		if c.State == kubecontainer.ContainerStateExited {
			s += fmt.Sprintf("(%d)", c.ExitCode)
		}
	}
	return s
}
