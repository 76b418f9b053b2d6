package main

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pod17 is a one-container pod as lab 17's node reports it.
func pod17(restarts int32, lastExit int32, running time.Time, ready v1.ConditionStatus, readySince time.Time) *v1.Pod {
	cs := v1.ContainerStatus{Name: "app", RestartCount: restarts,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(running)}}}
	if lastExit >= 0 {
		cs.LastTerminationState.Terminated = &v1.ContainerStateTerminated{ExitCode: lastExit}
	}
	return &v1.Pod{Status: v1.PodStatus{
		ContainerStatuses: []v1.ContainerStatus{cs},
		Conditions:        []v1.PodCondition{{Type: v1.PodReady, Status: ready, LastTransitionTime: metav1.NewTime(readySince)}},
	}}
}

func TestRestartedBy(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		n    int32
		exit int32
		done bool
	}{
		{"no pod", nil, 1, 143, false},
		{"not restarted yet", pod17(0, -1, now, v1.ConditionTrue, now), 1, 143, false},
		{"restarted by the probe", pod17(1, 143, now, v1.ConditionTrue, now), 1, 143, true},
		{"restarted, another exit code", pod17(1, 137, now, v1.ConditionTrue, now), 1, 143, false},
		{"any exit code", pod17(1, 137, now, v1.ConditionTrue, now), 1, -1, true},
		{"crash loop not far enough", pod17(4, 1, now, v1.ConditionTrue, now), 5, 1, false},
	} {
		if got := restartedBy(tc.pod, "x", tc.n, tc.exit, "step"); got.Done != tc.done {
			t.Errorf("%s: done %v, want %v (%s)", tc.name, got.Done, tc.done, got.What)
		}
	}
}

// The readiness step is done once the Ready condition changed after the
// container started: a pod just applied is unready since before its start.
func TestReadinessFlipped(t *testing.T) {
	start := time.Now().Add(-time.Minute).Truncate(time.Second)
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		done bool
	}{
		{"never ready since it started", pod17(0, -1, start, v1.ConditionFalse, start.Add(-2*time.Second)), false},
		{"ready now", pod17(0, -1, start, v1.ConditionTrue, start.Add(5*time.Second)), true},
		{"ready, then unready again", pod17(0, -1, start, v1.ConditionFalse, start.Add(9*time.Second)), true},
		{"restarted: not readiness's doing", pod17(1, 137, start, v1.ConditionTrue, start.Add(5*time.Second)), false},
	} {
		if got := readinessFlipped(tc.pod); got.Done != tc.done {
			t.Errorf("%s: done %v, want %v (%s)", tc.name, got.Done, tc.done, got.What)
		}
	}
}
