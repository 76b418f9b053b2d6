package kuberuntime

import (
	"encoding/json"
	"maps"
	"strconv"

	v1 "k8s.io/api/core/v1"
	kubetypes "k8s.io/kubelet/pkg/types"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

// Annotations the kubelet writes on every container (labels.go:33-41). The
// runtime stores them and gives them back in ContainerStatus: that is how a
// kubelet that restarted, or our PLEG's pod cache (mycore/plegruntime), knows a
// container's restart count, its spec hash and its pod's grace period
// without any state of its own.
const (
	AnnotationPodDeletionGracePeriod    = "io.kubernetes.pod.deletionGracePeriod"
	AnnotationPodTerminationGracePeriod = "io.kubernetes.pod.terminationGracePeriod"
	AnnotationContainerHash             = "io.kubernetes.container.hash"
	AnnotationContainerRestartCount     = "io.kubernetes.container.restartCount"
	AnnotationTerminationMessagePath    = "io.kubernetes.container.terminationMessagePath"
	AnnotationTerminationMessagePolicy  = "io.kubernetes.container.terminationMessagePolicy"
	AnnotationPreStopHandler            = "io.kubernetes.container.preStopHandler"
	AnnotationContainerPorts            = "io.kubernetes.container.ports"
)

// podLabels is newPodLabels (labels.go:76): the pod's own labels plus the
// three the kubelet finds its sandboxes by.
func podLabels(pod *v1.Pod) map[string]string {
	l := maps.Clone(pod.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l[kubetypes.KubernetesPodNameLabel] = pod.Name
	l[kubetypes.KubernetesPodNamespaceLabel] = pod.Namespace
	l[kubetypes.KubernetesPodUIDLabel] = string(pod.UID)
	return l
}

// containerLabels is newContainerLabels (labels.go:97): only the four
// identifying labels; everything else goes into annotations.
func containerLabels(c *v1.Container, pod *v1.Pod) map[string]string {
	return map[string]string{
		kubetypes.KubernetesPodNameLabel:       pod.Name,
		kubetypes.KubernetesPodNamespaceLabel:  pod.Namespace,
		kubetypes.KubernetesPodUIDLabel:        string(pod.UID),
		kubetypes.KubernetesContainerNameLabel: c.Name,
	}
}

// containerAnnotations is newContainerAnnotations (labels.go:108) without
// device-plugin annotations. The hash is what SyncPod compares to decide a
// container's spec changed and it must be restarted.
func containerAnnotations(c *v1.Container, pod *v1.Pod, restartCount int) map[string]string {
	a := map[string]string{
		AnnotationContainerHash:            strconv.FormatUint(kubecontainer.HashContainer(c), 16),
		AnnotationContainerRestartCount:    strconv.Itoa(restartCount),
		AnnotationTerminationMessagePath:   c.TerminationMessagePath,
		AnnotationTerminationMessagePolicy: string(c.TerminationMessagePolicy),
	}
	if pod.DeletionGracePeriodSeconds != nil {
		a[AnnotationPodDeletionGracePeriod] = strconv.FormatInt(*pod.DeletionGracePeriodSeconds, 10)
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		a[AnnotationPodTerminationGracePeriod] = strconv.FormatInt(*pod.Spec.TerminationGracePeriodSeconds, 10)
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if raw, err := json.Marshal(c.Lifecycle.PreStop); err == nil {
			a[AnnotationPreStopHandler] = string(raw)
		}
	}
	if len(c.Ports) > 0 {
		if raw, err := json.Marshal(c.Ports); err == nil {
			a[AnnotationContainerPorts] = string(raw)
		}
	}
	return a
}

// withLabels adds the Manager's own labels; the kubelet's win a clash.
func withLabels(l, extra map[string]string) map[string]string {
	for k, v := range extra {
		if _, ok := l[k]; !ok {
			l[k] = v
		}
	}
	return l
}
