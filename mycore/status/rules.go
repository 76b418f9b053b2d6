package status

import (
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/kubernetes/pkg/features"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
	kubeutil "k8s.io/kubernetes/pkg/kubelet/util"
)

// isPodStatusByKubeletEqual (:230-265): equal as far as the kubelet is
// concerned — conditions it owns compared by status, reason and message
// (not by their timestamps), fields it does not own ignored.
func isPodStatusByKubeletEqual(old, status *v1.PodStatus) bool {
	owned := func(cs []v1.PodCondition) map[v1.PodConditionType]v1.PodCondition {
		m := map[v1.PodConditionType]v1.PodCondition{}
		for _, c := range cs {
			if kubetypes.PodConditionByKubelet(c.Type) || kubetypes.PodConditionSharedByKubelet(c.Type) {
				m[c.Type] = c
			}
		}
		return m
	}
	oldC, newC := owned(old.Conditions), owned(status.Conditions)
	if len(oldC) != len(newC) {
		return false
	}
	for t, n := range newC {
		o, ok := oldC[t]
		if !ok || o.Status != n.Status || o.Message != n.Message || o.Reason != n.Reason {
			return false
		}
	}
	c := old.DeepCopy()
	c.Conditions = status.Conditions
	c.ResourceClaimStatuses = status.ResourceClaimStatuses
	c.ExtendedResourceClaimStatus = status.ExtendedResourceClaimStatus
	c.NodeAllocatableResourceClaimStatuses = status.NodeAllocatableResourceClaimStatuses
	return apiequality.Semantic.DeepEqual(c, status)
}

// normalizeStatus (:1306-1357): the apiserver keeps times to the second,
// so ours are cut to the second before any comparison; long termination
// messages are cut to the kubelet's share per container; container
// statuses are sorted.
func normalizeStatus(pod *v1.Pod, status *v1.PodStatus) {
	perContainer := kubecontainer.MaxPodTerminationMessageLogLength
	if n := len(pod.Spec.Containers) + len(pod.Spec.InitContainers) + len(pod.Spec.EphemeralContainers); n > 0 {
		perContainer /= n
	}
	norm := func(t *metav1.Time) { *t = t.Rfc3339Copy() }
	state := func(s *v1.ContainerState) {
		if s.Running != nil {
			norm(&s.Running.StartedAt)
		}
		if s.Terminated != nil {
			norm(&s.Terminated.StartedAt)
			norm(&s.Terminated.FinishedAt)
			if len(s.Terminated.Message) > perContainer {
				s.Terminated.Message = s.Terminated.Message[:perContainer]
			}
		}
	}
	if status.StartTime != nil {
		norm(status.StartTime)
	}
	for i := range status.Conditions {
		norm(&status.Conditions[i].LastProbeTime)
		norm(&status.Conditions[i].LastTransitionTime)
	}
	for _, list := range [][]v1.ContainerStatus{status.ContainerStatuses, status.InitContainerStatuses, status.EphemeralContainerStatuses} {
		for i := range list {
			state(&list[i].State)
			state(&list[i].LastTerminationState)
		}
	}
	sort.Sort(kubetypes.SortedContainerStatuses(status.ContainerStatuses))
	kubetypes.SortInitContainerStatuses(pod, status.InitContainerStatuses)
	sort.Sort(kubetypes.SortedContainerStatuses(status.EphemeralContainerStatuses))
}

// checkContainerStateTransition (:769-847): a terminated container may
// run again only if the pod's (or, with ContainerRestartRules, the
// container's) restart policy allows it. Anything else is a kubelet bug,
// and the status is refused: this is what keeps a Never pod's finished
// container from ever being reported running again.
func checkContainerStateTransition(old, next *v1.PodStatus, spec *v1.PodSpec) error {
	if spec.RestartPolicy == v1.RestartPolicyAlways {
		return nil
	}
	if utilfeature.DefaultFeatureGate.Enabled(features.RestartAllContainersOnContainerExits) && podutil.AllContainersCouldRestart(spec) {
		return nil
	}
	mayRestart := func(containers []v1.Container, s v1.ContainerStatus) bool {
		code := s.State.Terminated.ExitCode
		if code != 0 && spec.RestartPolicy == v1.RestartPolicyOnFailure {
			return true
		}
		if utilfeature.DefaultFeatureGate.Enabled(features.ContainerRestartRules) {
			for _, c := range containers {
				if c.Name == s.Name && podutil.ContainerShouldRestart(c, *spec, code) {
					return true
				}
			}
		}
		return false
	}
	for _, o := range old.ContainerStatuses {
		if o.State.Terminated == nil || mayRestart(spec.Containers, o) {
			continue
		}
		for _, n := range next.ContainerStatuses {
			if n.Name == o.Name && n.State.Terminated == nil {
				return fmt.Errorf("terminated container %v attempted illegal transition to non-terminated state", n.Name)
			}
		}
	}
	for i, o := range old.InitContainerStatuses {
		c, ok := kubeutil.GetContainerByIndex(spec.InitContainers, old.InitContainerStatuses, i)
		if !ok {
			return fmt.Errorf("found mismatch between pod spec and status, container: %v", o.Name)
		}
		if podutil.IsRestartableInitContainer(&c) || o.State.Terminated == nil || mayRestart(spec.InitContainers, o) {
			continue
		}
		for _, n := range next.InitContainerStatuses {
			if n.Name == o.Name && n.State.Terminated == nil {
				return fmt.Errorf("terminated init container %v attempted illegal transition to non-terminated state", n.Name)
			}
		}
	}
	return nil
}

// hasPodInitialized (:712-751): a pod without init containers always is;
// otherwise once a regular container left Waiting or the last init
// container succeeded (a sidecar: runs and started).
func hasPodInitialized(pod *v1.Pod) bool {
	if len(pod.Spec.InitContainers) == 0 {
		return true
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.LastTerminationState.Terminated != nil || s.State.Waiting == nil {
			return true
		}
	}
	l := len(pod.Status.InitContainerStatuses)
	if l == 0 {
		return false
	}
	c, ok := kubeutil.GetContainerByIndex(pod.Spec.InitContainers, pod.Status.InitContainerStatuses, l-1)
	if !ok {
		return false
	}
	s := pod.Status.InitContainerStatuses[l-1]
	if podutil.IsRestartableInitContainer(&c) {
		return s.State.Running != nil && s.Started != nil && *s.Started
	}
	for _, st := range []v1.ContainerState{s.LastTerminationState, s.State} {
		if st.Terminated != nil && st.Terminated.ExitCode == 0 {
			return true
		}
	}
	return false
}

// initializedContainers (:753-767): every init container status but the
// trailing ones that never started; at least the first.
func initializedContainers(cs []v1.ContainerStatus) []v1.ContainerStatus {
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i].State.Waiting == nil || cs[i].LastTerminationState.Terminated != nil {
			return cs[:i+1]
		}
	}
	if len(cs) > 0 {
		return cs[:1]
	}
	return nil
}

// roundMS is the time since t, for log lines.
func roundMS(t time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return time.Since(t).Round(time.Millisecond)
}
