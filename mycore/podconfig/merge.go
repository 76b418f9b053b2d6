package podconfig

import (
	"fmt"
	"reflect"

	v1 "k8s.io/api/core/v1"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
)

// OpName is the name syncLoopIteration logs for op ("SyncLoop ADD", ...):
// kubetypes.PodOperation is a bare int without a String method.
func OpName(op kubetypes.PodOperation) string {
	switch op {
	case kubetypes.ADD:
		return "ADD"
	case kubetypes.UPDATE:
		return "UPDATE"
	case kubetypes.DELETE:
		return "DELETE"
	case kubetypes.REMOVE:
		return "REMOVE"
	case kubetypes.RECONCILE:
		return "RECONCILE"
	}
	return fmt.Sprintf("PodOperation(%d)", int(op))
}

// noOp is what Classify returns when nothing the kubelet cares about changed
// (a resync, or only resourceVersion/managedFields moved).
const noOp kubetypes.PodOperation = -1

// Classify decides which op a new version ref of a known pod existing
// becomes, as checkAndUpdatePod (pkg/kubelet/config/config.go:362-401):
//
//   - spec, labels, non-kubelet annotations, deletionTimestamp or
//     deletionGracePeriodSeconds differ: DELETE if ref carries a
//     deletionTimestamp (graceful deletion), else UPDATE;
//   - only the status differs: RECONCILE (the kubelet owns pod status, so
//     a status it did not write must be reconciled);
//   - nothing of that differs: no op (ok is false).
func Classify(existing, ref *v1.Pod) (op kubetypes.PodOperation, ok bool) {
	if !podsDifferSemantically(existing, ref) {
		if !reflect.DeepEqual(existing.Status, ref.Status) {
			return kubetypes.RECONCILE, true
		}
		return noOp, false
	}
	if ref.DeletionTimestamp != nil {
		return kubetypes.DELETE, true
	}
	return kubetypes.UPDATE, true
}

// podsDifferSemantically is config.go:345-354.
func podsDifferSemantically(existing, ref *v1.Pod) bool {
	return !(reflect.DeepEqual(existing.Spec, ref.Spec) &&
		reflect.DeepEqual(existing.Labels, ref.Labels) &&
		reflect.DeepEqual(existing.DeletionTimestamp, ref.DeletionTimestamp) &&
		reflect.DeepEqual(existing.DeletionGracePeriodSeconds, ref.DeletionGracePeriodSeconds) &&
		annotationsEqual(existing.Annotations, ref.Annotations))
}

// localAnnotations are the ones the kubelet itself adds (config.go:282-286):
// they never make a pod "different".
var localAnnotations = []string{
	kubetypes.ConfigSourceAnnotationKey,
	kubetypes.ConfigMirrorAnnotationKey,
	kubetypes.ConfigFirstSeenAnnotationKey,
}

func isLocal(key string) bool {
	for _, k := range localAnnotations {
		if k == key {
			return true
		}
	}
	return false
}

// annotationsEqual is isAnnotationMapEqual (config.go:299-322): equal
// except for the kubelet's local annotations.
func annotationsEqual(a, b map[string]string) bool {
	count := func(m map[string]string) int {
		n := 0
		for k := range m {
			if !isLocal(k) {
				n++
			}
		}
		return n
	}
	if count(a) != count(b) {
		return false
	}
	for k, v := range b {
		if isLocal(k) {
			continue
		}
		if av, ok := a[k]; !ok || av != v {
			return false
		}
	}
	return true
}

// annotate marks pod as coming from the apiserver source, as merge does to
// every pod before comparing it (config.go:199-203); firstSeen is kept from
// the version we knew, or set now for a new pod (recordFirstSeenTime,
// config.go:325-328).
func annotate(pod *v1.Pod, known *v1.Pod) {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[kubetypes.ConfigSourceAnnotationKey] = kubetypes.ApiserverSource
	if known != nil && known.Annotations[kubetypes.ConfigFirstSeenAnnotationKey] != "" {
		pod.Annotations[kubetypes.ConfigFirstSeenAnnotationKey] = known.Annotations[kubetypes.ConfigFirstSeenAnnotationKey]
	} else {
		pod.Annotations[kubetypes.ConfigFirstSeenAnnotationKey] = kubetypes.NewTimestamp().GetString()
	}
}
