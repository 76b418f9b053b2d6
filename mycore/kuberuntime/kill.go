package kuberuntime

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/events"

	"kubelet-labs/mycore/cri"
)

// MinimumGracePeriodSeconds is minimumGracePeriodInSeconds
// (kuberuntime_manager.go:84): however short the grace a pod or a deletion
// asks for, a container gets at least this long between the stop signal
// and SIGKILL — "a minimal shutdown window to avoid unnecessary SIGKILLs".
// Only the runtime's own StopContainer(timeout=0), which the kubelet never
// sends for a container, kills at once.
const MinimumGracePeriodSeconds = 2

// KillReason is why a container is killed (containerKillReason,
// kuberuntime_container.go): a failed liveness or startup probe may bring
// its own terminationGracePeriodSeconds.
type KillReason string

// The reasons setTerminationGracePeriod tells apart.
const (
	ReasonUnknown       KillReason = ""
	ReasonLivenessProbe KillReason = "LivenessProbe"
	ReasonStartupProbe  KillReason = "StartupProbe"
)

// GracePeriod is the grace a container gets before any preStop hook or
// clamping: setTerminationGracePeriod (kuberuntime_container.go:1434-1456)
// then the caller's override (:886-890). from says which field decided, for
// a learner to see.
//
//  1. the override, if the caller gives one (the pod workers pass the grace
//     they settled on; eviction passes its own);
//  2. else metadata.deletionGracePeriodSeconds — set by the apiserver when
//     the pod is deleted (kubectl delete --grace-period=N, or the spec's
//     value by default);
//  3. else the probe's terminationGracePeriodSeconds for a probe kill;
//  4. else spec.terminationGracePeriodSeconds (30 s unless the pod says);
//  5. else the minimum.
func GracePeriod(pod *v1.Pod, c *v1.Container, reason KillReason, override *int64) (seconds int64, from string) {
	switch {
	case override != nil:
		return *override, "the caller's override"
	case pod.DeletionGracePeriodSeconds != nil:
		return *pod.DeletionGracePeriodSeconds, "metadata.deletionGracePeriodSeconds"
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		if p := probeOf(c, reason); p != nil && p.TerminationGracePeriodSeconds != nil {
			return *p.TerminationGracePeriodSeconds, fmt.Sprintf("the %s probe's terminationGracePeriodSeconds", reason)
		}
		return *pod.Spec.TerminationGracePeriodSeconds, "spec.terminationGracePeriodSeconds"
	}
	return MinimumGracePeriodSeconds, "the minimum (the pod sets no grace period)"
}

func probeOf(c *v1.Container, reason KillReason) *v1.Probe {
	switch {
	case c == nil:
		return nil
	case reason == ReasonLivenessProbe:
		return c.LivenessProbe
	case reason == ReasonStartupProbe:
		return c.StartupProbe
	}
	return nil
}

// KillContainer stops one container the kubelet's way and reports it as
// the kubelet does, a SyncResult of action KillContainer for the
// container's name. pod may be nil (a kubelet that restarted finds
// containers of pods it no longer knows): the grace period and the preStop
// hook are then read back from the annotations the kubelet wrote on the
// container (restoreSpecsFromContainerLabels, kuberuntime_container.go:818).
func (m *Manager) KillContainer(ctx context.Context, pod *v1.Pod, id kubecontainer.ContainerID, name string, reason KillReason, gracePeriodOverride *int64) *kubecontainer.SyncResult {
	return m.KillContainerWithMessage(ctx, pod, id, name, reason, "", gracePeriodOverride)
}

// KillContainerWithMessage is KillContainer whose Killing event says
// message (computePodActions' reason, e.g. "Container app failed liveness
// probe, will be restarted"); "" says "Stopping container NAME".
func (m *Manager) KillContainerWithMessage(ctx context.Context, pod *v1.Pod, id kubecontainer.ContainerID, name string, reason KillReason, message string, gracePeriodOverride *int64) *kubecontainer.SyncResult {
	r := kubecontainer.NewSyncResult(kubecontainer.KillContainer, name)
	if err := m.killContainer(ctx, pod, id, name, reason, gracePeriodOverride, nil, message); err != nil {
		r.Fail(kubecontainer.ErrKillContainer, err.Error())
	}
	return r
}

// killContainer is killContainer (kuberuntime_container.go:861-926):
//
//  1. the grace period (GracePeriod);
//  2. the preStop hook, if any and if there is time: it runs inside the
//     grace period, so its duration (whole seconds, as upstream) is
//     subtracted (:893-896);
//  3. with sidecars, wait for this container's turn (:899-903);
//  4. clamp to the 2 s minimum (:905-907);
//  5. CRI StopContainer(id, timeout=grace). The runtime sends the stop
//     signal, waits up to the timeout, then SIGKILLs: the kubelet itself
//     never sends a signal. cri-client bounds the call by its request
//     timeout plus the grace (remote_runtime.go:444-452), so a SIGKILL at
//     the end of the grace still has time to be reported;
//  6. NotFound is success: the container is already gone (:912-913).
func (m *Manager) killContainer(ctx context.Context, pod *v1.Pod, id kubecontainer.ContainerID, name string, reason KillReason, override *int64, ordering *terminationOrdering, message string) error {
	var spec *v1.Container
	if pod != nil {
		if spec = kubecontainer.GetContainerSpec(pod, name); spec == nil {
			return fmt.Errorf("no container %q in the spec of pod %s/%s (id %s)", name, pod.Namespace, pod.Name, cri.ShortID(id.ID))
		}
	} else {
		var err error
		pod, spec, err = m.restoreSpecs(ctx, id.ID)
		if isNotFound(err) {
			// Upstream fails the kill here; a container that is gone is
			// stopped, as NotFound from StopContainer below says too.
			m.log("  %s %s is already gone (NotFound counts as stopped)", name, cri.ShortID(id.ID))
			return nil
		}
		if err != nil {
			return err
		}
	}

	grace, from := GracePeriod(pod, spec, reason, override)
	if message == "" {
		message = "Stopping container " + spec.Name
	}
	m.recordContainerEvent(pod, spec, id.ID, v1.EventTypeNormal, events.KillingContainer, "%v", message)
	steps := fmt.Sprintf("%ds from %s", grace, from)
	if spec.Lifecycle != nil && spec.Lifecycle.PreStop != nil && grace > 0 {
		took := m.runPreStop(ctx, pod, id, spec, grace)
		grace -= int64(took.Seconds())
		steps += fmt.Sprintf(", minus the preStop hook's %ds", int64(took.Seconds()))
	}
	if ordering != nil && grace > 0 {
		waited := ordering.waitForTurn(name, grace)
		if s := int64(waited.Seconds()); s > 0 {
			grace -= s
			steps += fmt.Sprintf(", minus %ds waiting for its turn", s)
		}
	}
	if grace < MinimumGracePeriodSeconds {
		grace = MinimumGracePeriodSeconds
		steps += fmt.Sprintf(", raised to the %ds minimum", MinimumGracePeriodSeconds)
	}

	m.say(podCall(pod, "StopContainer", name, 0), "CRI StopContainer %s/%s %s timeout=%ds (%s)", pod.Name, name, cri.ShortID(id.ID), grace, steps)
	start := time.Now()
	err := m.cri.Runtime.StopContainer(m.cri.Context(ctx), id.ID, grace)
	switch {
	case isNotFound(err):
		m.log("  %s/%s %s is already gone (NotFound counts as stopped)", pod.Name, name, cri.ShortID(id.ID))
	case err != nil:
		return fmt.Errorf("StopContainer %s (grace %ds): %w", name, grace, err)
	default:
		took := time.Since(start)
		m.say(podCall(pod, "StopContainer", name, took), "  %s/%s stopped after %.3fs", pod.Name, name, took.Seconds())
	}
	if ordering != nil {
		ordering.containerTerminated(name)
	}
	return nil
}

// KillPod stops every running container of runningPod in parallel, then
// every sandbox of it: KillPod (kuberuntime_manager.go:1946), which returns
// only the error of killPodWithSyncResult.
func (m *Manager) KillPod(ctx context.Context, pod *v1.Pod, runningPod kubecontainer.Pod, gracePeriodOverride *int64) error {
	r := m.KillPodWithSyncResult(ctx, pod, runningPod, gracePeriodOverride)
	return r.Error()
}

// KillPodWithSyncResult is killPodWithSyncResult
// (kuberuntime_manager.go:1953-1973):
//
//  1. the containers, all at once (killContainersWithSyncResult), one
//     SyncResult each — so a pod of three containers that all ignore
//     SIGTERM takes one grace period, not three;
//  2. then StopPodSandbox for each of the pod's sandboxes, one SyncResult
//     of action KillPodSandbox for the pod. The runtime kills what still
//     runs in it and tears the pod's network down (CNI DEL); NotFound is
//     success.
//
// Nothing is removed: the stopped containers and sandboxes stay in the
// runtime (their logs and exit codes with them) until GarbageCollect.
//
// runningPod is what the runtime runs — build it from a pod status with
// kubecontainer.ConvertPodStatusToRunningPod, as the kubelet's killPod
// does; pod, when known, gives the grace periods, preStop hooks and sidecar
// order, and may be nil.
func (m *Manager) KillPodWithSyncResult(ctx context.Context, pod *v1.Pod, runningPod kubecontainer.Pod, gracePeriodOverride *int64) (result kubecontainer.PodSyncResult) {
	for _, r := range m.killContainersWithSyncResult(ctx, pod, runningPod, gracePeriodOverride) {
		result.AddSyncResult(r)
	}

	sandboxResult := kubecontainer.NewSyncResult(kubecontainer.KillPodSandbox, runningPod.ID)
	result.AddSyncResult(sandboxResult)
	for _, sb := range runningPod.Sandboxes {
		start := time.Now()
		err := m.cri.Runtime.StopPodSandbox(m.cri.Context(ctx), sb.ID.ID)
		if err != nil && !isNotFound(err) {
			sandboxResult.Fail(kubecontainer.ErrKillPodSandbox, fmt.Sprintf("StopPodSandbox %s: %v", cri.ShortID(sb.ID.ID), err))
			continue
		}
		m.say(criCall(runningPod.Namespace, runningPod.Name, string(runningPod.ID), "StopPodSandbox", "", time.Since(start)),
			"CRI StopPodSandbox %s/%s %s (containers stopped first; the runtime tears down the network)", runningPod.Namespace, runningPod.Name, cri.ShortID(sb.ID.ID))
	}
	return result
}

// killContainersWithSyncResult is kuberuntime_container.go:929-970: one
// goroutine per running container, a WaitGroup, and the results collected
// through a channel (so they arrive in the order the containers stopped).
// A pod with sidecars (restartable init containers) gets a termination
// order: each sidecar waits until the main containers — and the sidecars
// started after it — have stopped, within its grace period.
func (m *Manager) killContainersWithSyncResult(ctx context.Context, pod *v1.Pod, runningPod kubecontainer.Pod, override *int64) []*kubecontainer.SyncResult {
	results := make(chan *kubecontainer.SyncResult, len(runningPod.Containers))
	var wg sync.WaitGroup

	var ordering *terminationOrdering
	if hasSidecars(pod) {
		var names []string
		for _, c := range runningPod.Containers {
			names = append(names, c.Name)
		}
		ordering = newTerminationOrdering(pod, names)
	}
	wg.Add(len(runningPod.Containers))
	for _, c := range runningPod.Containers {
		go func(c *kubecontainer.Container) {
			defer utilruntime.HandleCrashWithContext(ctx)
			defer wg.Done()
			r := kubecontainer.NewSyncResult(kubecontainer.KillContainer, c.Name)
			if err := m.killContainer(ctx, pod, c.ID, c.Name, ReasonUnknown, override, ordering, ""); err != nil {
				r.Fail(kubecontainer.ErrKillContainer, err.Error())
			}
			results <- r
		}(c)
	}
	wg.Wait()
	close(results)

	var out []*kubecontainer.SyncResult
	for r := range results {
		out = append(out, r)
	}
	return out
}
