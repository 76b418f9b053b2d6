package kuberuntime

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/features"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubekr "k8s.io/kubernetes/pkg/kubelet/kuberuntime"
	proberesults "k8s.io/kubernetes/pkg/kubelet/prober/results"
)

// This file is the compute-pod-actions build-it stage: the two decisions
// at the heart of computePodActions (pkg/kubelet/kuberuntime/
// kuberuntime_manager.go:1175-1386, v1.36.3) — what a new sandbox starts,
// and, for a pod whose sandbox is fine, what each regular container needs.
// ComputePodActions (actions.go) calls them; the sandbox check, the
// ephemeral and the init containers stay there. Helpers you may use:
// restartOnFailure, runOnce, succeeded, containerChanged, get (actions.go),
// m.computeResize (resize.go), kubecontainer.ShouldContainerBeRestarted,
// kubekr.HasAnyRegularContainerCreated.

// newSandboxActions fills a for a pod whose sandbox must be (re)created
// (kuberuntime_manager.go:1205-1264). a arrives with KillPod and
// CreateSandbox true, a.Attempt the number of sandboxes the pod had, and
// an empty ContainersToStart. In order:
//   - the pod is done — restartPolicy Never, not its first sandbox
//     (Attempt != 0) and the runtime knows some container of it: no new
//     sandbox (CreateSandbox = false), start nothing;
//   - the containers to start are all regular containers except those
//     that run once (runOnce: OnFailure, the pod's or the container's own)
//     and already succeeded (succeeded);
//   - none to start and some regular container was created before
//     (kubekr.HasAnyRegularContainerCreated): no new sandbox either;
//   - with init containers, start only the first (InitContainersToStart =
//     [0]) and no regular container; otherwise start the containers found.
//
//stage:compute-pod-actions
func newSandboxActions(pod *v1.Pod, podStatus *kubecontainer.PodStatus, a *PodActions) {
	if !restartOnFailure(pod) && a.Attempt != 0 && len(podStatus.ContainerStatuses) != 0 {
		// restartPolicy Never and the pod ran: it is over, no new sandbox.
		a.CreateSandbox = false
		return
	}
	var toStart []int
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if runOnce(pod, c) && succeeded(c, podStatus) {
			continue
		}
		toStart = append(toStart, i)
	}
	if len(toStart) == 0 && kubekr.HasAnyRegularContainerCreated(pod, podStatus) {
		// Every container succeeded and none restarts.
		a.CreateSandbox = false
		return
	}
	if len(pod.Spec.InitContainers) != 0 {
		a.InitContainersToStart = []int{0}
		return
	}
	a.ContainersToStart = toStart
}

// containerActions decides, for each regular container of an initialized
// pod whose sandbox is fine, whether to start, kill or keep it
// (kuberuntime_manager.go:1291-1382), adding indexes of pod.Spec.Containers
// to a.ContainersToStart and entries keyed by the running instance's ID to
// a.ContainersToKill (Name, Container, Message, Reason).
//
// A container with no instance, or one not running: start it if
// kubecontainer.ShouldContainerBeRestarted says so — and when its state is
// Unknown also kill it first (ReasonUnknown, message
// `Container is in "unknown" state, try killing it before restart`): it
// may still run, and two instances must never run at once.
//
// A running container is killed, first reason found:
//   - its spec hash changed (containerChanged): message "Container NAME
//     definition changed (spec hash W, running H)" with %x, ReasonUnknown,
//     and it always starts again whatever the restart policy;
//   - its liveness probe result (get(m.liveness, ID)) is Failure: "Container
//     NAME failed liveness probe", ReasonLivenessProbe;
//   - its startup probe result (m.startup) is Failure: "Container NAME
//     failed startup probe", ReasonStartupProbe.
//
// After a probe failure it starts again only if the restart policy allows:
// restartOnFailure(pod), overridden by the container's own
// restartPolicy (!= Never) when the ContainerRestartRules feature is on.
// A container that starts again gets ", will be restarted" appended to its
// message and its index in ContainersToStart. Otherwise, when
// m.computeResize(pod, i, status, a) returns true the container is kept
// (count it); when it returns false the resize restarts it (nothing more).
//
// Finally: nothing kept and nothing to start means the pod is done —
// KillPod = true, and InitContainersToStart = nil so sidecars do not keep
// it alive.
//
//stage:compute-pod-actions
func (m *Manager) containerActions(pod *v1.Pod, podStatus *kubecontainer.PodStatus, a *PodActions) {
	keep := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		s := podStatus.FindContainerStatusByName(c.Name)
		if s == nil || s.State != kubecontainer.ContainerStateRunning {
			if kubecontainer.ShouldContainerBeRestarted(klog.Background(), c, pod, podStatus) {
				a.ContainersToStart = append(a.ContainersToStart, i)
				if s != nil && s.State == kubecontainer.ContainerStateUnknown {
					// It may still run: never two instances at once.
					a.ContainersToKill[s.ID] = ContainerToKill{Name: s.Name, Container: c, Reason: ReasonUnknown,
						Message: fmt.Sprintf("Container is in %q state, try killing it before restart", s.State)}
				}
			}
			continue
		}
		// It runs; kill it if one of these holds.
		restart := restartOnFailure(pod)
		if utilfeature.DefaultFeatureGate.Enabled(features.ContainerRestartRules) && c.RestartPolicy != nil {
			restart = *c.RestartPolicy != v1.ContainerRestartPolicyNever
		}
		var msg string
		var reason KillReason
		if want, have, changed := containerChanged(c, s); changed {
			msg = fmt.Sprintf("Container %s definition changed (spec hash %x, running %x)", c.Name, want, have)
			restart = true // whatever the policy: the new spec must run
		} else if r, ok := get(m.liveness, s.ID); ok && r == proberesults.Failure {
			msg, reason = fmt.Sprintf("Container %s failed liveness probe", c.Name), ReasonLivenessProbe
		} else if r, ok := get(m.startup, s.ID); ok && r == proberesults.Failure {
			msg, reason = fmt.Sprintf("Container %s failed startup probe", c.Name), ReasonStartupProbe
		} else if !m.computeResize(pod, i, s, a) {
			continue // its resizePolicy restarts it with the new resources
		} else {
			keep++
			continue
		}
		if restart {
			msg += ", will be restarted"
			a.ContainersToStart = append(a.ContainersToStart, i)
		}
		a.ContainersToKill[s.ID] = ContainerToKill{Name: s.Name, Container: c, Message: msg, Reason: reason}
	}

	if keep == 0 && len(a.ContainersToStart) == 0 {
		a.KillPod = true
		// Sidecars must not keep a finished pod alive.
		a.InitContainersToStart = nil
	}
}
