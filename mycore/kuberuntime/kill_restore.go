package kuberuntime

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubetypes "k8s.io/kubelet/pkg/types"

	"kubelet-labs/mycore/cri"
)

// restoreSpecs is restoreSpecsFromContainerLabels
// (kuberuntime_container.go:818-855): when the kubelet must kill a
// container of a pod it no longer has (it restarted, the pod was deleted
// meanwhile), the runtime still has what the kubelet wrote on the
// container — labels name the pod, annotations carry the grace periods and
// the preStop hook. The result is not a full spec: only what killing needs.
func (m *Manager) restoreSpecs(ctx context.Context, id string) (*v1.Pod, *v1.Container, error) {
	// About no pod: which one is what this call finds out.
	s, err := m.cri.ContainerStatus(ctx, onNode, id)
	if err != nil {
		return nil, nil, fmt.Errorf("ContainerStatus %s (to read back its pod's grace period): %w", cri.ShortID(id), err)
	}
	l, a := s.GetLabels(), s.GetAnnotations()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			UID:                        types.UID(l[kubetypes.KubernetesPodUIDLabel]),
			Name:                       l[kubetypes.KubernetesPodNameLabel],
			Namespace:                  l[kubetypes.KubernetesPodNamespaceLabel],
			DeletionGracePeriodSeconds: int64Annotation(a, AnnotationPodDeletionGracePeriod),
		},
		Spec: v1.PodSpec{TerminationGracePeriodSeconds: int64Annotation(a, AnnotationPodTerminationGracePeriod)},
	}
	c := &v1.Container{Name: l[kubetypes.KubernetesContainerNameLabel], TerminationMessagePath: a[AnnotationTerminationMessagePath]}
	if raw, ok := a[AnnotationPreStopHandler]; ok {
		h := &v1.LifecycleHandler{}
		// A bad annotation loses the hook, not the kill (upstream logs it too).
		if err := json.Unmarshal([]byte(raw), h); err == nil {
			c.Lifecycle = &v1.Lifecycle{PreStop: h}
		} else {
			m.log("  container %s: unreadable preStop annotation, killing without the hook: %v", cri.ShortID(id), err)
		}
	}
	return pod, c, nil
}

// int64Annotation is getInt64PointerFromLabel (labels.go): nil when absent
// or not a number.
func int64Annotation(a map[string]string, key string) *int64 {
	v, err := strconv.ParseInt(a[key], 10, 64)
	if err != nil {
		return nil
	}
	return &v
}
