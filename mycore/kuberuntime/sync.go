package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/events"
	kubekr "k8s.io/kubernetes/pkg/kubelet/kuberuntime"
	"k8s.io/kubernetes/pkg/kubelet/util/format"

	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/journal"
)

// SyncPod makes the runtime match the pod, the runtime manager's SyncPod
// (kuberuntime_manager.go:1450-1796): decide everything first
// (ComputePodActions), then act, in this order:
//
//  1. compute the actions;
//  2. kill the whole pod if the sandbox must be replaced or nothing is
//     left to run — else kill only the containers that must go (spec
//     changed, liveness or startup probe failed, state unknown);
//  3. create a new sandbox if needed (the pod gets a new IP);
//  4. start the ephemeral containers added since the last sync;
//  5. start the next init container(s), stopping at the first that fails
//     to start;
//  6. resize running containers in place (resize.go);
//  7. start the regular containers, each only once its crash-loop
//     back-off has passed (doBackOff).
//
// Left out from upstream: image volumes, dynamic resources, pod-level
// resources' pod cgroup, RestartAllContainers. node fills the
// downward-API fields of the containers' env. backOff is the kubelet's
// crashLoopBackOff (10 s doubling to 5 min; kubelet.go:1068); nil starts
// without back-off.
func (m *Manager) SyncPod(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus, node PodIPs, backOff *flowcontrol.Backoff) (result kubecontainer.PodSyncResult) {
	// Step 1: what to do.
	actions := m.ComputePodActions(pod, podStatus)
	m.say(journal.Entry{Kind: journal.Decision, Pod: pod.Namespace + "/" + pod.Name, UID: string(pod.UID), Call: "computePodActions"},
		"computePodActions %s/%s: %s", pod.Namespace, pod.Name, actions.Describe(pod))

	// Step 2: kill (:1467-1526).
	if actions.KillPod {
		running := kubecontainer.ConvertPodStatusToRunningPod(runtimeName(podStatus), podStatus)
		kill := m.KillPodWithSyncResult(ctx, pod, running, nil)
		result.AddPodSyncResult(kill)
		if kill.Error() != nil {
			return result
		}
		if actions.CreateSandbox {
			// A new sandbox runs every init container again (:1482-1484).
			m.purgeInitContainers(ctx, pod, podStatus)
		}
	} else {
		for _, id := range actions.killOrder() {
			k := actions.ContainersToKill[id]
			r := m.KillContainerWithMessage(ctx, pod, id, k.Name, k.Reason, k.Message, nil)
			result.AddSyncResult(r)
			if r.Error != nil {
				return result
			}
		}
	}
	m.pruneInitContainersBeforeStart(ctx, pod, podStatus)
	if !actions.CreateSandbox && len(actions.InitContainersToStart)+len(actions.ContainersToStart)+len(actions.EphemeralContainersToStart)+len(actions.ContainersToUpdate) == 0 {
		return result
	}

	// Step 3: a sandbox (:1545-1653). The containers' env gets the IPs of
	// the sandbox they will run in: the new one's, not the pod cache's.
	node.PodIPs = podStatus.IPs
	sandboxID := actions.SandboxID
	if actions.CreateSandbox {
		r := kubecontainer.NewSyncResult(kubecontainer.CreatePodSandbox, string(pod.UID))
		result.AddSyncResult(r)
		id, err := m.CreateSandbox(ctx, pod, actions.Attempt)
		if err != nil {
			r.Fail(kubecontainer.ErrCreatePodSandbox, err.Error())
			return result
		}
		sandboxID = id
		st, err := m.cri.PodSandboxStatus(ctx, podAbout(pod), id)
		if err != nil {
			result.Fail(fmt.Errorf("PodSandboxStatus %s: %w", cri.ShortID(id), err))
			return result
		}
		if !kubecontainer.IsHostNetworkPod(pod) {
			node.PodIPs = sandboxIPs(st)
		}
	}
	// :1668-1673: the containers' sandbox config, DNS included.
	sandboxCfg, err := m.SandboxConfig(ctx, pod, actions.Attempt)
	if err != nil {
		result.Fail(fmt.Errorf("GeneratePodSandboxConfig for pod %q failed: %w", format.Pod(pod), err))
		return result
	}

	// start is the helper of :1687-1741: back-off first, then start.
	start := func(c *v1.Container) error {
		r := kubecontainer.NewSyncResult(kubecontainer.StartContainer, c.Name)
		result.AddSyncResult(r)
		if wait, msg := doBackOff(pod, c, podStatus, backOff); wait != nil {
			e := journal.Entry{Kind: journal.BackOff, Pod: pod.Namespace + "/" + pod.Name, UID: string(pod.UID), Container: c.Name, Call: "CrashLoopBackOff"}
			var b *kubecontainer.BackoffError
			if errors.As(wait, &b) {
				e.Until = b.BackoffTime()
			}
			m.say(e, "  %s", msg)
			// kuberuntime_manager.go:1927
			m.recordContainerEvent(pod, c, "", v1.EventTypeWarning, events.BackOffStartContainer, "Back-off restarting failed container %s in pod %s", c.Name, format.Pod(pod))
			r.Fail(wait, msg)
			return wait
		}
		if _, err := m.StartContainer(ctx, sandboxID, sandboxCfg, pod, c, podStatus, node); err != nil {
			reason := kubecontainer.ErrRunContainer
			if r, ok := ImageReason(err); ok {
				reason = r
			}
			switch {
			case IsConfigError(err):
				reason = kubekr.ErrCreateContainerConfig
			case IsPostStartHookError(err):
				reason = kubekr.ErrPostStartHook
			}
			r.Fail(reason, err.Error())
			return err
		}
		if last := lastExited(podStatus, c.Name); last != nil && backOff != nil {
			m.log("  %s restarted %s after its last exit (exit code %d); its next back-off: %s",
				c.Name, time.Since(last.FinishedAt).Round(10*time.Millisecond), last.ExitCode, backOff.Get(backoffKey(pod, c)))
		}
		return nil
	}

	// Step 4: ephemeral containers, before the init containers so that a
	// pod stuck initializing can still be debugged (:1743-1749).
	for _, i := range actions.EphemeralContainersToStart {
		_ = start((*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)) // the error is in result
	}
	// Step 5: init containers, in order; a regular one that fails to start
	// stops the sync (the next sync tries again), a sidecar does not (:1751-1766).
	for _, i := range actions.InitContainersToStart {
		c := &pod.Spec.InitContainers[i]
		if err := start(c); err != nil && !podutil.IsRestartableInitContainer(c) {
			return result
		}
	}
	// Step 6: resize running containers in place (:1783-1788, resize.go).
	if len(actions.ContainersToUpdate) > 0 {
		result.AddSyncResult(m.resizeInPlace(ctx, pod, actions.ContainersToUpdate))
	}
	// Step 7: the containers (:1790-1793).
	for _, i := range actions.ContainersToStart {
		_ = start(&pod.Spec.Containers[i]) // the error is in result
	}
	return result
}

// lastExited is the newest exited instance of the named container.
func lastExited(podStatus *kubecontainer.PodStatus, name string) *kubecontainer.Status {
	for _, s := range podStatus.ContainerStatuses { // newest first
		if s.Name == name && s.State == kubecontainer.ContainerStateExited {
			return s
		}
	}
	return nil
}

// purgeInitContainers is kuberuntime_container.go:1008: with a new sandbox
// every init container runs again, so the old instances go. Their logs
// stay (upstream passes removeLogs=false), for the garbage collector.
func (m *Manager) purgeInitContainers(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus) {
	for _, ic := range pod.Spec.InitContainers {
		for _, s := range podStatus.ContainerStatuses {
			if s.Name == ic.Name {
				m.removeInitContainer(ctx, pod, s)
			}
		}
	}
}

// pruneInitContainersBeforeStart is kuberuntime_container.go:971: of each
// init container only the newest exited instance is kept (its exit code is
// what the status shows), so a crash-looping init container does not pile
// up dead instances between garbage collections.
func (m *Manager) pruneInitContainersBeforeStart(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus) {
	for _, ic := range pod.Spec.InitContainers {
		count := 0
		for _, s := range podStatus.ContainerStatuses { // newest first
			if s.Name != ic.Name || (s.State != kubecontainer.ContainerStateExited && s.State != kubecontainer.ContainerStateUnknown) {
				continue
			}
			if count++; count > 1 {
				m.removeInitContainer(ctx, pod, s)
			}
		}
	}
}

func (m *Manager) removeInitContainer(ctx context.Context, pod *v1.Pod, s *kubecontainer.Status) {
	on := podAbout(pod).of(s.Name).saying("CRI RemoveContainer %s/%s %s (an old init container)", pod.Name, s.Name, cri.ShortID(s.ID.ID))
	if err := m.cri.RemoveContainer(ctx, on, s.ID.ID); err != nil && !isNotFound(err) {
		m.log("  remove init container %s/%s %s: %v (the garbage collector will retry)", pod.Name, s.Name, cri.ShortID(s.ID.ID), err)
	}
}

// runtimeName is the runtime's name as the pod cache's container IDs
// carry it ("containerd://…"), for the running pod handed to KillPod.
func runtimeName(ps *kubecontainer.PodStatus) string {
	for _, c := range ps.ContainerStatuses {
		if c.ID.Type != "" {
			return c.ID.Type
		}
	}
	return ""
}

// sandboxIPs is determinePodSandboxIPs (kuberuntime_sandbox.go:282).
func sandboxIPs(s *runtimeapi.PodSandboxStatus) []string {
	var ips []string
	if n := s.GetNetwork(); n != nil {
		if n.Ip != "" {
			ips = append(ips, n.Ip)
		}
		for _, ip := range n.AdditionalIps {
			ips = append(ips, ip.Ip)
		}
	}
	return ips
}
