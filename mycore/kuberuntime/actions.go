package kuberuntime

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/kubernetes/pkg/features"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	runtimeutil "k8s.io/kubernetes/pkg/kubelet/kuberuntime/util"
	proberesults "k8s.io/kubernetes/pkg/kubelet/prober/results"
)

// ProbeResults is what the runtime manager reads of the prober: the last
// result of a container's liveness or startup probe, by container ID. The
// kubelet's results cache (proberesults.NewManager) satisfies it.
type ProbeResults interface {
	Get(kubecontainer.ContainerID) (proberesults.Result, bool)
}

// PodActions is podActions (kuberuntime_manager.go:605-642): everything
// one sync will do to a pod, decided before anything is done.
type PodActions struct {
	// KillPod: stop every running container and the sandbox.
	KillPod bool
	// CreateSandbox: start a new sandbox (after KillPod); every container,
	// init containers first, then starts again in it.
	CreateSandbox bool
	// SandboxID is the sandbox containers start in (when not creating one).
	SandboxID string
	// Attempt counts the pod's sandboxes before the one to create.
	Attempt uint32
	// InitContainersToStart and ContainersToStart index pod.Spec.InitContainers
	// and pod.Spec.Containers.
	InitContainersToStart []int
	ContainersToStart     []int
	// EphemeralContainersToStart index pod.Spec.EphemeralContainers: the
	// debug containers added since the last sync (never restarted).
	EphemeralContainersToStart []int
	// ContainersToUpdate are running containers resized in place (resize.go).
	ContainersToUpdate []ContainerToUpdate
	// ContainersToKill are running containers that must stop, each with why.
	ContainersToKill map[kubecontainer.ContainerID]ContainerToKill
}

// ContainerToKill is containerToKillInfo (kuberuntime_manager.go:570).
type ContainerToKill struct {
	Name      string
	Container *v1.Container
	// Message is what the kubelet says in its Killing event, e.g.
	// "Container app failed liveness probe, will be restarted".
	Message string
	// Reason picks the probe's own terminationGracePeriodSeconds, if any.
	Reason KillReason
}

// Describe says in one line what the sync will do, naming containers, e.g.
// "kill app (Container app failed liveness probe, will be restarted); start app".
func (a PodActions) Describe(pod *v1.Pod) string {
	var parts []string
	switch {
	case a.KillPod && a.CreateSandbox && a.Attempt == 0:
		parts = append(parts, "create the sandbox (attempt 0)")
	case a.KillPod && a.CreateSandbox:
		parts = append(parts, fmt.Sprintf("kill the pod and create a new sandbox (attempt %d): the last one is not ready or its network changed", a.Attempt))
	case a.KillPod:
		parts = append(parts, "kill the pod (what runs, then the sandbox): nothing is left to run")
	}
	// With KillPod these die with the pod; their reasons still say why.
	for _, id := range a.killOrder() {
		k := a.ContainersToKill[id]
		parts = append(parts, fmt.Sprintf("kill %s (%s)", k.Name, k.Message))
	}
	names := func(list []v1.Container, idx []int) string {
		var n []string
		for _, i := range idx {
			n = append(n, list[i].Name)
		}
		return strings.Join(n, ", ")
	}
	if len(a.InitContainersToStart) > 0 {
		parts = append(parts, "start init "+names(pod.Spec.InitContainers, a.InitContainersToStart))
	}
	if len(a.ContainersToStart) > 0 {
		parts = append(parts, "start "+names(pod.Spec.Containers, a.ContainersToStart))
	}
	if len(a.ContainersToUpdate) > 0 {
		var n []string
		for _, u := range a.ContainersToUpdate {
			n = append(n, pod.Spec.Containers[u.Index].Name)
		}
		parts = append(parts, "resize "+strings.Join(n, ", ")+" in place")
	}
	if len(a.EphemeralContainersToStart) > 0 {
		var n []string
		for _, i := range a.EphemeralContainersToStart {
			n = append(n, pod.Spec.EphemeralContainers[i].Name)
		}
		parts = append(parts, "start ephemeral "+strings.Join(n, ", "))
	}
	if len(parts) == 0 {
		return "nothing to do"
	}
	return strings.Join(parts, "; ")
}

// killOrder is ContainersToKill's keys, ordered by name (a map has none;
// upstream kills in map order).
func (a PodActions) killOrder() []kubecontainer.ContainerID {
	ids := make([]kubecontainer.ContainerID, 0, len(a.ContainersToKill))
	for id := range a.ContainersToKill {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(x, y kubecontainer.ContainerID) int {
		return strings.Compare(a.ContainersToKill[x].Name, a.ContainersToKill[y].Name)
	})
	return ids
}

// ComputePodActions is computePodActions (kuberuntime_manager.go:1175-
// 1386): compare the pod with what the runtime has and decide.
//
//   - The sandbox is gone, not ready, or has the wrong network namespace
//     (runtimeutil.PodSandboxChanged): kill everything and start over in a
//     new one — unless the pod is done (restartPolicy Never and it ran, or
//     nothing would start again).
//   - Init containers not done: the next one starts, and the regular
//     containers wait (computeInitContainerActions).
//   - Each regular container that does not run starts again if the restart
//     policy says so (kubecontainer.ShouldContainerBeRestarted); the
//     crash-loop back-off is checked later, when SyncPod starts it.
//   - Each container that runs is killed if its spec hash changed (then it
//     always restarts), or its liveness or startup probe failed (then it
//     restarts per the restart policy).
//   - Nothing kept and nothing to start: kill the pod (the sandbox goes).
//   - A running container whose resources changed (in-place resize) is
//     updated where it runs, or restarted if its resizePolicy says so
//     (resize.go).
//   - Ephemeral containers (kubectl debug) start once, even before the
//     pod is initialized, and never again: one that exited stays exited,
//     and a new sandbox does not bring them back.
//
// The new sandbox's decision (newSandboxActions) and the regular
// containers' (containerActions) are in actions_decide.go, the
// compute-pod-actions build-it stage.
//
// Left out from upstream: resizing sidecars, and RestartAllContainers.
func (m *Manager) ComputePodActions(pod *v1.Pod, podStatus *kubecontainer.PodStatus) PodActions {
	createSandbox, attempt, sandboxID := runtimeutil.PodSandboxChanged(pod, podStatus)
	a := PodActions{
		KillPod: createSandbox, CreateSandbox: createSandbox, SandboxID: sandboxID, Attempt: attempt,
		ContainersToStart: []int{}, ContainersToKill: map[kubecontainer.ContainerID]ContainerToKill{},
	}

	// A new sandbox: everything starts from scratch (:1205-1264).
	if createSandbox {
		newSandboxActions(pod, podStatus, &a)
		return a
	}

	// Ephemeral containers, whatever the init containers do (:1266-1274):
	// one the runtime has ever had is not started again.
	for i := range pod.Spec.EphemeralContainers {
		if podStatus.FindContainerStatusByName(pod.Spec.EphemeralContainers[i].Name) == nil {
			a.EphemeralContainersToStart = append(a.EphemeralContainersToStart, i)
		}
	}

	// Init containers first (:1280-1287).
	if initialized := m.computeInitContainerActions(pod, podStatus, &a); a.KillPod || !initialized {
		return a
	}

	// The regular containers (:1291-1382).
	m.containerActions(pod, podStatus, &a)
	return a
}

// computeInitContainerActions is kuberuntime_container.go:1060-1313: it
// walks the init containers from the last one back, to find the next to
// start (completed ones may have been removed from the runtime already),
// keeps sidecars (restartable init containers) running, and reports
// whether the pod is initialized. An init container that failed with
// restartPolicy Never makes the pod over (KillPod).
func (m *Manager) computeInitContainerActions(pod *v1.Pod, podStatus *kubecontainer.PodStatus, a *PodActions) bool {
	if len(pod.Spec.InitContainers) == 0 {
		return true
	}
	// A regular container created or running: initialization happened,
	// even if the init containers are gone from the runtime by now.
	initialized := false
	for _, c := range pod.Spec.Containers {
		if s := podStatus.FindContainerStatusByName(c.Name); s != nil &&
			(s.State == kubecontainer.ContainerStateCreated || s.State == kubecontainer.ContainerStateRunning) {
			initialized = true
			break
		}
	}
	previouslyInitialized := initialized
	restart := restartOnFailure(pod)
	kill := func(s *kubecontainer.Status, c *v1.Container, msg string, reason KillReason) {
		a.ContainersToKill[s.ID] = ContainerToKill{Name: c.Name, Container: c, Message: msg, Reason: reason}
	}

	for i := len(pod.Spec.InitContainers) - 1; i >= 0; i-- {
		c := &pod.Spec.InitContainers[i]
		sidecar := podutil.IsRestartableInitContainer(c)
		s := podStatus.FindContainerStatusByName(c.Name)
		if s == nil {
			if previouslyInitialized && sidecar {
				a.InitContainersToStart = append(a.InitContainersToStart, i)
			}
			continue
		}
		if previouslyInitialized && !sidecar {
			continue // done long ago; only sidecars must keep running
		}
		switch s.State {
		case kubecontainer.ContainerStateCreated:
			// Created but never started: start it (again).
			a.InitContainersToStart = append(a.InitContainersToStart, i)

		case kubecontainer.ContainerStateRunning:
			if !sidecar {
				break // still initializing
			}
			if c.StartupProbe != nil {
				r, ok := get(m.startup, s.ID)
				if !ok {
					break // not probed yet: wait
				}
				if r != proberesults.Success {
					if r == proberesults.Failure {
						kill(s, c, fmt.Sprintf("Init container %s failed startup probe", c.Name), ReasonStartupProbe)
						a.InitContainersToStart = append(a.InitContainersToStart, i)
					}
					break
				}
			}
			// This sidecar has started: the next init container may go.
			if i == len(pod.Spec.InitContainers)-1 {
				initialized = true
			} else if !previouslyInitialized {
				a.InitContainersToStart = append(a.InitContainersToStart, i+1)
			}
			if _, _, changed := containerChanged(c, s); changed {
				kill(s, c, fmt.Sprintf("Init container %s definition changed", c.Name), ReasonUnknown)
				a.InitContainersToStart = append(a.InitContainersToStart, i)
				break
			}
			if c.LivenessProbe != nil {
				if r, ok := get(m.liveness, s.ID); ok && r == proberesults.Failure {
					kill(s, c, fmt.Sprintf("Init container %s failed liveness probe", c.Name), ReasonLivenessProbe)
					a.InitContainersToStart = append(a.InitContainersToStart, i)
				}
			}

		case kubecontainer.ContainerStateExited:
			if sidecar {
				a.InitContainersToStart = append(a.InitContainersToStart, i)
				break
			}
			if initContainerFailed(s) {
				r := restart
				if utilfeature.DefaultFeatureGate.Enabled(features.ContainerRestartRules) {
					r = kubecontainer.ShouldContainerBeRestarted(klog.Background(), c, pod, podStatus)
				}
				if !r {
					a.KillPod = true
					a.InitContainersToStart = nil
					return false
				}
				a.InitContainersToStart = append(a.InitContainersToStart, i)
				break
			}
			// Succeeded: the next one, or initialized if it was the last.
			if i == len(pod.Spec.InitContainers)-1 {
				initialized = true
			} else {
				a.InitContainersToStart = append(a.InitContainersToStart, i+1)
			}

		default: // unknown: it may still run; kill before starting again
			msg := fmt.Sprintf("Init container is in %q state, try killing it before restart", s.State)
			if !sidecar {
				r := restart
				if utilfeature.DefaultFeatureGate.Enabled(features.ContainerRestartRules) && c.RestartPolicy != nil {
					r = *c.RestartPolicy != v1.ContainerRestartPolicyNever
				}
				if !r {
					a.KillPod = true
					a.InitContainersToStart = nil
					return false
				}
			}
			kill(s, c, msg, ReasonUnknown)
			a.InitContainersToStart = append(a.InitContainersToStart, i)
		}
		previouslyInitialized = true
	}
	if !previouslyInitialized {
		a.InitContainersToStart = append(a.InitContainersToStart, 0) // none ran yet
	}
	slices.Reverse(a.InitContainersToStart) // found back to front, started front to back
	return initialized
}

// initContainerFailed is isInitContainerFailed (helpers.go:173): killed
// for memory, exited non-zero, or in an unknown state.
func initContainerFailed(s *kubecontainer.Status) bool {
	if s.Reason == "OOMKilled" || (s.State == kubecontainer.ContainerStateExited && s.ExitCode != 0) {
		return true
	}
	return s.State == kubecontainer.ContainerStateUnknown
}

// containerChanged is kuberuntime_manager.go:662: the hash of the spec
// (kubecontainer.HashContainer: name and image, the only fields of a
// running pod's container that can change) against the one the kubelet
// wrote on the container when it created it.
func containerChanged(c *v1.Container, s *kubecontainer.Status) (want, have uint64, changed bool) {
	want = kubecontainer.HashContainer(c)
	return want, s.Hash, s.Hash != want
}

// restartOnFailure is shouldRestartOnFailure (kuberuntime_manager.go:667).
func restartOnFailure(pod *v1.Pod) bool { return pod.Spec.RestartPolicy != v1.RestartPolicyNever }

// runOnce: the container is not started again once it succeeded — the
// pod's OnFailure policy, or the container's own (ContainerRestartRules,
// on by default since 1.35) (:1219-1232).
func runOnce(pod *v1.Pod, c *v1.Container) bool {
	if utilfeature.DefaultFeatureGate.Enabled(features.ContainerRestartRules) && c.RestartPolicy != nil {
		return *c.RestartPolicy == v1.ContainerRestartPolicyOnFailure
	}
	return pod.Spec.RestartPolicy == v1.RestartPolicyOnFailure
}

// succeeded is containerSucceeded (kuberuntime_manager.go:671): its last
// instance exited 0.
func succeeded(c *v1.Container, podStatus *kubecontainer.PodStatus) bool {
	s := podStatus.FindContainerStatusByName(c.Name)
	return s != nil && s.State == kubecontainer.ContainerStateExited && s.ExitCode == 0
}

func get(r ProbeResults, id kubecontainer.ContainerID) (proberesults.Result, bool) {
	if r == nil {
		return proberesults.Unknown, false
	}
	return r.Get(id)
}
