package kuberuntime

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
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
//  1. the grace period (GracePeriod, kill_grace.go);
//  2. stopTimeout (kill_grace.go) spends it: the preStop hook, if any and
//     if there is time, runs inside the grace period, so its duration
//     (whole seconds, as upstream) is subtracted (:893-895); with sidecars,
//     so is the wait for this container's turn (:899-902); and the result
//     is never under the 2 s minimum (:905-907);
//  3. CRI StopContainer(id, timeout=grace). The runtime sends the stop
//     signal, waits up to the timeout, then SIGKILLs: the kubelet itself
//     never sends a signal. cri-client bounds the call by its request
//     timeout plus the grace (remote_runtime.go:444-452), so a SIGKILL at
//     the end of the grace still has time to be reported;
//  4. NotFound is success: the container is already gone (:912-913).
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
	// The steps say, for the learner, where the timeout came from. left is
	// the grace after each step, to tell when stopTimeout raised it.
	steps := fmt.Sprintf("%ds from %s", grace, from)
	left := grace
	var preStop, waitTurn func(budget int64) time.Duration
	if spec.Lifecycle != nil && spec.Lifecycle.PreStop != nil {
		preStop = func(budget int64) time.Duration {
			took := m.runPreStop(ctx, pod, id, spec, budget)
			left = budget - int64(took.Seconds())
			steps += fmt.Sprintf(", minus the preStop hook's %ds", int64(took.Seconds()))
			return took
		}
	}
	if ordering != nil {
		waitTurn = func(budget int64) time.Duration {
			waited := ordering.waitForTurn(name, budget)
			left = budget - int64(waited.Seconds())
			if s := int64(waited.Seconds()); s > 0 {
				steps += fmt.Sprintf(", minus %ds waiting for its turn", s)
			}
			return waited
		}
	}
	grace = stopTimeout(grace, preStop, waitTurn)
	if grace > left {
		steps += fmt.Sprintf(", raised to the %ds minimum", grace)
	}

	on := podAbout(pod).of(name).
		announce("CRI StopContainer %s/%s %s timeout=%ds (%s)", pod.Name, name, cri.ShortID(id.ID), grace, steps).
		said(func(r returned) string {
			if r.err != nil {
				return ""
			}
			return fmt.Sprintf("  %s/%s stopped after %.3fs", pod.Name, name, r.took.Seconds())
		})
	err := m.cri.StopContainer(ctx, on, id.ID, grace)
	switch {
	case isNotFound(err):
		m.log("  %s/%s %s is already gone (NotFound counts as stopped)", pod.Name, name, cri.ShortID(id.ID))
	case err != nil:
		return fmt.Errorf("StopContainer %s (grace %ds): %w", name, grace, err)
	}
	if ordering != nil {
		ordering.containerTerminated(name)
	}
	return nil
}

// KillPod stops every running container of runningPod in parallel, then
// every sandbox of it: KillPod (kuberuntime_manager.go:1946), which returns
// only the error of killPodWithSyncResult (KillPodWithSyncResult,
// kill_pod.go).
func (m *Manager) KillPod(ctx context.Context, pod *v1.Pod, runningPod kubecontainer.Pod, gracePeriodOverride *int64) error {
	r := m.KillPodWithSyncResult(ctx, pod, runningPod, gracePeriodOverride)
	return r.Error()
}

// stopSandbox is one CRI StopPodSandbox, with its printed line when it
// succeeds or finds the sandbox gone. The runtime kills what
// still runs in the sandbox and tears the pod's network down (CNI DEL).
// The error is the runtime's, NotFound included: what it means is
// KillPodWithSyncResult's call.
func (m *Manager) stopSandbox(ctx context.Context, runningPod kubecontainer.Pod, id string) error {
	return m.cri.StopPodSandbox(ctx, runningPodAbout(runningPod).
		saying("CRI StopPodSandbox %s/%s %s (containers stopped first; the runtime tears down the network)", runningPod.Namespace, runningPod.Name, cri.ShortID(id)), id)
}
