package status

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The status merged for the apiserver must not change the cached status it
// came from: GetPodStatus copies that one under a read lock while the sync
// merges, so a write into it is a data race (CI saw one with -race during
// graceful node shutdown, whose DisruptionTarget condition is merged).
func TestMergeLeavesItsInputAlone(t *testing.T) {
	long := metav1.NewTime(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	old := v1.PodStatus{Phase: v1.PodRunning}
	next := v1.PodStatus{
		Phase: v1.PodFailed,
		Conditions: []v1.PodCondition{
			{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, LastTransitionTime: long},
		},
	}

	merged := mergePodStatus(pod, old, next, false)

	if got := next.Conditions[0].LastTransitionTime; !got.Equal(&long) {
		t.Errorf("the input's DisruptionTarget changed: lastTransitionTime %v, was %v", got, long)
	}
	var found bool
	for _, c := range merged.Conditions {
		if c.Type == v1.DisruptionTarget {
			found = true
			if c.LastTransitionTime.Equal(&long) {
				t.Errorf("the merged DisruptionTarget kept the old lastTransitionTime: a new condition's time is now")
			}
		}
	}
	if !found {
		t.Errorf("the merged status has no DisruptionTarget: %+v", merged.Conditions)
	}
}
