package kuberuntime

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

// The graders of the build-it stage kill-grace (kill_grace.go): which
// grace period a container gets, and the timeout StopContainer gets from
// it. Pure functions and a fake runtime: they run in milliseconds.

func i64(v int64) *int64 { return &v }

func gracePod(spec, deletion *int64, containers ...v1.Container) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web", DeletionGracePeriodSeconds: deletion},
		Spec:       v1.PodSpec{TerminationGracePeriodSeconds: spec, Containers: containers},
	}
}

// Which field decides, in which order (setTerminationGracePeriod,
// kuberuntime_container.go:1434-1456, then the override, :886-890).
func TestGracePeriodChoice(t *testing.T) {
	probes := &v1.Container{Name: "app",
		LivenessProbe: &v1.Probe{TerminationGracePeriodSeconds: i64(7)},
		StartupProbe:  &v1.Probe{TerminationGracePeriodSeconds: i64(9)}}
	bare := &v1.Container{Name: "app", LivenessProbe: &v1.Probe{}}
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		c        *v1.Container
		reason   KillReason
		override *int64
		want     int64
		from     string // a word from must contain
		why      string
	}{
		{"the spec's grace", gracePod(i64(30), nil), bare, ReasonUnknown, nil, 30, "terminationGracePeriodSeconds",
			"with no deletion and no override, spec.terminationGracePeriodSeconds decides (kuberuntime_container.go:1450)"},
		{"the deletion's grace beats the spec's", gracePod(i64(30), i64(5)), bare, ReasonUnknown, nil, 5, "deletionGracePeriodSeconds",
			"metadata.deletionGracePeriodSeconds (kubectl delete --grace-period=5) comes first (kuberuntime_container.go:1437-1438)"},
		{"a deletion's grace of 0 is a grace", gracePod(i64(30), i64(0)), bare, ReasonUnknown, nil, 0, "deletionGracePeriodSeconds",
			"a set deletionGracePeriodSeconds decides even when it is 0; the 2 s floor comes later, in killContainer (kuberuntime_container.go:1437-1438, 905-907)"},
		{"the override beats everything", gracePod(i64(30), i64(5)), probes, ReasonLivenessProbe, i64(1), 1, "override",
			"the caller's gracePeriodOverride replaces whatever setTerminationGracePeriod chose (kuberuntime_container.go:886-890)"},
		{"an override of 0 is an override", gracePod(i64(30), nil), bare, ReasonUnknown, i64(0), 0, "override",
			"a non-nil override decides even when it is 0 (kuberuntime_container.go:886-887)"},
		{"a liveness kill uses the liveness probe's grace", gracePod(i64(30), nil), probes, ReasonLivenessProbe, nil, 7, "LivenessProbe",
			"a container killed for its liveness probe gets livenessProbe.terminationGracePeriodSeconds (kuberuntime_container.go:1445-1447)"},
		{"a startup kill uses the startup probe's grace", gracePod(i64(30), nil), probes, ReasonStartupProbe, nil, 9, "StartupProbe",
			"a container killed for its startup probe gets startupProbe.terminationGracePeriodSeconds (kuberuntime_container.go:1441-1443)"},
		{"a probe's grace only for its own kill", gracePod(i64(30), nil), probes, ReasonUnknown, nil, 30, "terminationGracePeriodSeconds",
			"the probes' grace applies only when that probe killed the container; any other kill uses the spec's (kuberuntime_container.go:1439-1450)"},
		{"a probe without its own grace", gracePod(i64(30), nil), bare, ReasonLivenessProbe, nil, 30, "terminationGracePeriodSeconds",
			"a liveness probe that sets no terminationGracePeriodSeconds leaves the spec's (kuberuntime_container.go:1445-1450)"},
		{"the deletion's grace beats a probe's", gracePod(i64(30), i64(4)), probes, ReasonLivenessProbe, nil, 4, "deletionGracePeriodSeconds",
			"a pod being deleted uses the deletion's grace even for a probe kill (kuberuntime_container.go:1437-1438)"},
		{"no container spec", gracePod(i64(30), nil), nil, ReasonLivenessProbe, nil, 30, "terminationGracePeriodSeconds",
			"with no container (c == nil) there is no probe to ask: the spec's grace (kuberuntime_container.go:1450)"},
		{"nothing set", gracePod(nil, nil), bare, ReasonUnknown, nil, MinimumGracePeriodSeconds, "minimum",
			"a pod with no grace at all gets minimumGracePeriodInSeconds (kuberuntime_container.go:1435, 1452-1453; kuberuntime_manager.go:84)"},
	} {
		got, from := GracePeriod(tc.pod, tc.c, tc.reason, tc.override)
		if got != tc.want {
			t.Errorf("%s: GracePeriod = %d, want %d: %s (v1.36.3)", tc.name, got, tc.want, tc.why)
		} else if !strings.Contains(from, tc.from) {
			t.Errorf("%s: GracePeriod = %d from %q: the seconds are right, but from should name what decided (contain %q): lab 15 prints it", tc.name, got, from, tc.from)
		}
	}
}

// fakeStep is a preStop hook or a wait for the sidecar turn that takes
// took, and remembers the budget it was given.
type fakeStep struct {
	took   time.Duration
	called bool
	budget int64
}

func (f *fakeStep) fn() func(int64) time.Duration {
	if f == nil {
		return nil
	}
	return func(budget int64) time.Duration {
		f.called, f.budget = true, budget
		return f.took
	}
}

func (f *fakeStep) String() string {
	if f == nil {
		return "none"
	}
	return fmt.Sprintf("taking %s", f.took)
}

// What the grace leaves for StopContainer once the preStop hook and the
// sidecar turn have run inside it, and the floor (kuberuntime_container.go
// :892-907).
func TestStopTimeout(t *testing.T) {
	type want struct {
		timeout          int64
		hookBudget       int64 // -1: the hook must not run
		waitBudget       int64 // -1: no wait
		hookRun, waitRun bool
	}
	for _, tc := range []struct {
		name       string
		grace      int64
		hook, wait *fakeStep
		want       want
		why        string
	}{
		{"no hook: the grace is the timeout", 30, nil, nil, want{timeout: 30},
			"with nothing to run first, StopContainer gets the whole grace (kuberuntime_container.go:912)"},
		{"the hook's time comes off the grace", 10, &fakeStep{took: 3 * time.Second}, nil, want{timeout: 7, hookRun: true, hookBudget: 10},
			"the preStop hook runs inside the grace period, with all of it as its budget, and its time is subtracted: 10 − 3 = 7 (kuberuntime_container.go:893-895)"},
		{"whole seconds: 1.9 s counts as 1", 3, &fakeStep{took: 1900 * time.Millisecond}, nil, want{timeout: 2, hookRun: true, hookBudget: 3},
			"executePreStopHook returns int64(metav1.Now().Sub(start.Time).Seconds()): whole seconds, truncated, so 3 − 1 = 2 (kuberuntime_container.go:807, 894)"},
		{"a short grace is raised to 2 s", 1, nil, nil, want{timeout: MinimumGracePeriodSeconds},
			"however short the grace, the container gets minimumGracePeriodInSeconds = 2 before SIGKILL (kuberuntime_container.go:905-907; kuberuntime_manager.go:84)"},
		{"a grace of 0 is raised to 2 s", 0, nil, nil, want{timeout: MinimumGracePeriodSeconds},
			"even a grace of 0 becomes 2 s: \"always give containers a minimal shutdown window\" (kuberuntime_container.go:905-907)"},
		{"a hook that ate the grace leaves the floor", 3, &fakeStep{took: 5 * time.Second}, nil, want{timeout: MinimumGracePeriodSeconds, hookRun: true, hookBudget: 3},
			"3 − 5 < 2: the floor still gives the container 2 s (kuberuntime_container.go:893-895, 905-907)"},
		{"no grace, no hook", 0, &fakeStep{took: time.Second}, nil, want{timeout: MinimumGracePeriodSeconds},
			"the hook runs only \"if there is enough time to run it\": gracePeriod > 0 (kuberuntime_container.go:893)"},
		{"the sidecar's wait comes off too", 10, &fakeStep{took: 3 * time.Second}, &fakeStep{took: 4500 * time.Millisecond},
			want{timeout: 3, hookRun: true, hookBudget: 10, waitRun: true, waitBudget: 7},
			"after the hook, a sidecar waits for its turn with what is left (7 s), and the whole seconds it waited come off: 10 − 3 − 4 = 3 (kuberuntime_container.go:899-902)"},
		{"no wait once the grace is spent", 3, &fakeStep{took: 3 * time.Second}, &fakeStep{took: time.Second},
			want{timeout: MinimumGracePeriodSeconds, hookRun: true, hookBudget: 3},
			"the turn is waited for only if grace is left (ordering != nil && gracePeriod > 0, kuberuntime_container.go:899-902)"},
		{"a wait under a second costs nothing", 10, nil, &fakeStep{took: 400 * time.Millisecond}, want{timeout: 10, waitRun: true, waitBudget: 10},
			"\"the time we've waited gets truncated downward\": 0.4 s is 0 s (kuberuntime_container.go:900-902)"},
	} {
		got := stopTimeout(tc.grace, tc.hook.fn(), tc.wait.fn())
		what := fmt.Sprintf("%s: stopTimeout(grace %d, hook %s, wait %s)", tc.name, tc.grace, tc.hook, tc.wait)
		if tc.hook != nil && tc.hook.called != tc.want.hookRun {
			t.Errorf("%s: the preStop hook ran=%v, want %v: %s (v1.36.3)", what, tc.hook.called, tc.want.hookRun, tc.why)
		} else if tc.hook != nil && tc.hook.called && tc.hook.budget != tc.want.hookBudget {
			t.Errorf("%s: the hook's budget was %d s, want %d: %s (v1.36.3)", what, tc.hook.budget, tc.want.hookBudget, tc.why)
		}
		if tc.wait != nil && tc.wait.called != tc.want.waitRun {
			t.Errorf("%s: the wait for its turn ran=%v, want %v: %s (v1.36.3)", what, tc.wait.called, tc.want.waitRun, tc.why)
		} else if tc.wait != nil && tc.wait.called && tc.wait.budget != tc.want.waitBudget {
			t.Errorf("%s: the wait's budget was %d s, want %d: %s (v1.36.3)", what, tc.wait.budget, tc.want.waitBudget, tc.why)
		}
		if got != tc.want.timeout {
			t.Errorf("%s = %d, want %d: %s (v1.36.3)", what, got, tc.want.timeout, tc.why)
		}
	}
}

// End to end through KillContainer: the timeout the runtime gets.
func TestKillContainerStopTimeout(t *testing.T) {
	probes := v1.Container{Name: "app", LivenessProbe: &v1.Probe{TerminationGracePeriodSeconds: i64(7)}}
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		reason   KillReason
		override *int64
		want     int64
		why      string
	}{
		{"a pod with 30 s", gracePod(i64(30), nil, probes), ReasonUnknown, nil, 30,
			"the spec's terminationGracePeriodSeconds (kuberuntime_container.go:1450, 912)"},
		{"kubectl delete --grace-period=1", gracePod(i64(30), i64(1), probes), ReasonUnknown, nil, 2,
			"the deletion's 1 s, raised to the 2 s minimum (kuberuntime_container.go:1437-1438, 905-907)"},
		{"an override of 0", gracePod(i64(30), nil, probes), ReasonUnknown, i64(0), 2,
			"the override's 0, raised to the 2 s minimum: the kubelet never asks the runtime for an immediate SIGKILL (kuberuntime_container.go:886-890, 905-907)"},
		{"a failed liveness probe", gracePod(i64(30), nil, probes), ReasonLivenessProbe, nil, 7,
			"the liveness probe's own terminationGracePeriodSeconds (kuberuntime_container.go:1445-1447)"},
	} {
		var got []int64
		rt := &stopRuntime{container: func(_ context.Context, _ string, timeout int64) error {
			got = append(got, timeout)
			return nil
		}}
		r := managerOver(rt).KillContainer(context.Background(), tc.pod, kubecontainer.ContainerID{Type: "containerd", ID: "app-id"}, "app", tc.reason, tc.override)
		switch {
		case r.Error != nil:
			t.Errorf("%s: KillContainer failed: %s", tc.name, r.Message)
		case len(got) != 1:
			t.Errorf("%s: %d StopContainer calls, want 1", tc.name, len(got))
		case got[0] != tc.want:
			t.Errorf("%s: StopContainer(timeout=%d), want timeout=%d: %s (v1.36.3); a timeout of 0 makes the runtime SIGKILL at once", tc.name, got[0], tc.want, tc.why)
		}
	}
}
