package status

import (
	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/kubernetes/pkg/features"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
)

// getPhase is the kubelet's getPhase (kubelet_pods.go:1653-1875): the
// pod's phase from its container statuses.
//
//	Pending    an init container has not succeeded yet, or a container waits
//	Running    every container started and one runs
//	Succeeded  every container exited 0 and none will restart
//	Failed     every container exited, one not 0, and none will restart
//
// podIsTerminal (the pod is being stopped for good) makes "every container
// exited" final whatever the restart policy says.
func getPhase(pod *v1.Pod, info []v1.ContainerStatus, podIsTerminal, podHasInitialized bool) v1.PodPhase {
	spec := pod.Spec
	restartRules := utilfeature.DefaultFeatureGate.Enabled(features.ContainerRestartRules)
	restartAll := utilfeature.DefaultFeatureGate.Enabled(features.RestartAllContainersOnContainerExits)
	// notRestartable: would this exit end the container for good?
	notRestartable := func(c v1.Container, t *v1.ContainerStateTerminated) bool {
		r := podutil.ContainerShouldRestart(c, spec, t.ExitCode)
		if restartAll {
			r = r || t.Reason == RestartingAllContainers
		}
		return !r
	}

	// Regular init containers (:1660-1708).
	pendingInit, failedInit, failedInitFinal := 0, 0, 0
	for _, c := range spec.InitContainers {
		if podutil.IsRestartableInitContainer(&c) {
			continue
		}
		s, ok := podutil.GetContainerStatus(info, c.Name)
		switch {
		case !ok, s.State.Running != nil:
			pendingInit++
		case s.State.Terminated != nil:
			if s.State.Terminated.ExitCode != 0 {
				failedInit++
				if restartRules && notRestartable(c, s.State.Terminated) {
					failedInitFinal++
				}
			}
		case s.State.Waiting != nil && s.LastTerminationState.Terminated != nil:
			if t := s.LastTerminationState.Terminated; t.ExitCode != 0 {
				failedInit++
				if notRestartable(c, t) {
					failedInitFinal++
				}
			}
		default:
			pendingInit++
		}
	}

	// Sidecars (restartable init containers) and regular containers
	// (:1710-1795).
	var unknown, running, waiting, stopped, stoppedFinal, succeeded, pendingSidecars int
	for _, c := range spec.InitContainers {
		if !podutil.IsRestartableInitContainer(&c) {
			continue
		}
		s, ok := podutil.GetContainerStatus(info, c.Name)
		switch {
		case !ok:
			unknown++
		case s.State.Running != nil:
			if s.Started == nil || !*s.Started {
				pendingSidecars++
			}
			running++
		case s.State.Terminated != nil:
			// a stopped sidecar does not count
		case s.State.Waiting != nil:
			if s.LastTerminationState.Terminated == nil {
				pendingSidecars++
				waiting++
			}
		default:
			pendingSidecars++
			unknown++
		}
	}
	for _, c := range spec.Containers {
		s, ok := podutil.GetContainerStatus(info, c.Name)
		switch {
		case !ok:
			unknown++
		case s.State.Running != nil:
			running++
		case s.State.Terminated != nil:
			stopped++
			if restartRules && notRestartable(c, s.State.Terminated) {
				stoppedFinal++
			}
			if s.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case s.State.Waiting != nil:
			if s.LastTerminationState.Terminated != nil {
				stopped++
				if restartRules && notRestartable(c, s.LastTerminationState.Terminated) {
					stoppedFinal++
				}
			} else {
				waiting++
			}
		default:
			unknown++
		}
	}

	if restartRules {
		if failedInitFinal > 0 {
			return v1.PodFailed
		}
	} else if failedInit > 0 && spec.RestartPolicy == v1.RestartPolicyNever {
		return v1.PodFailed
	}

	switch {
	case pendingInit > 0 || (pendingSidecars > 0 && !podHasInitialized), waiting > 0:
		return v1.PodPending
	case running > 0 && unknown == 0:
		return v1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		if podIsTerminal && !kubetypes.IsStaticPod(pod) {
			if stopped == succeeded {
				return v1.PodSucceeded
			}
			return v1.PodFailed
		}
		if restartRules {
			switch {
			case stopped != stoppedFinal:
				return v1.PodRunning // some will restart
			case stopped == succeeded:
				return v1.PodSucceeded
			}
			return v1.PodFailed
		}
		switch {
		case spec.RestartPolicy == v1.RestartPolicyAlways:
			return v1.PodRunning
		case stopped == succeeded:
			return v1.PodSucceeded
		case spec.RestartPolicy == v1.RestartPolicyNever:
			return v1.PodFailed
		}
		return v1.PodRunning // OnFailure, restarting
	default:
		return v1.PodPending
	}
}
