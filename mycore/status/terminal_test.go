package status

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	kubestatus "k8s.io/kubernetes/pkg/kubelet/status"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
)

// workersSay is the pod workers' answer to "could a container of this pod
// still run?".
type workersSay bool

func (s workersSay) CouldHaveRunningContainers(types.UID) bool { return bool(s) }

// TestCanBeDeleted: when the status manager deletes a pod for good, as
// upstream's canBeDeleted decides (pkg/kubelet/status/status_manager.go:
// 1241-1258, v1.36.3).
func TestCanBeDeleted(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	pod := func(deleting bool, phase v1.PodPhase, mirror bool) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
			Status: v1.PodStatus{Phase: phase}}
		if deleting {
			p.DeletionTimestamp = &now
		}
		if mirror {
			p.Annotations = map[string]string{kubetypes.ConfigMirrorAnnotationKey: "hash"}
		}
		return p
	}
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod // the apiserver's copy
		finished bool    // TerminatePod was called
		couldRun workersSay
		want     bool
		why      string
	}{
		{name: "deleted, Succeeded in the apiserver, finished", pod: pod(true, v1.PodSucceeded, false), finished: true, want: true,
			why: "a pod being deleted whose terminal phase the apiserver has, and whose termination is finished, is deleted (pkg/kubelet/status/status_manager.go:1241-1258)"},
		{name: "deleted, Failed in the apiserver, finished", pod: pod(true, v1.PodFailed, false), finished: true, want: true,
			why: "Failed is terminal as Succeeded is (podutil.IsPodPhaseTerminal, pkg/kubelet/status/status_manager.go:1247)"},
		{name: "not being deleted", pod: pod(false, v1.PodSucceeded, false), finished: true, want: false,
			why: "only a pod with a deletionTimestamp is deleted: a finished Job's pod stays until someone deletes it (pkg/kubelet/status/status_manager.go:1242)"},
		{name: "a mirror pod", pod: pod(true, v1.PodSucceeded, true), finished: true, want: false,
			why: "a mirror pod is never the status manager's to delete: it belongs to the mirror client (kubetypes.IsMirrorPod, pkg/kubelet/status/status_manager.go:1242)"},
		{name: "the apiserver still shows Running", pod: pod(true, v1.PodRunning, false), finished: true, want: false,
			why: "deletion waits until the phase in the apiserver (pod.Status, not ours) is terminal, so the terminal status is posted first (pkg/kubelet/status/status_manager.go:1247-1251)"},
		{name: "termination not finished", pod: pod(true, v1.PodFailed, false), finished: false, want: false,
			why: "deletion waits until TerminatePod was called, i.e. SyncTerminatedPod completed (versioned.finished; pkg/kubelet/status/status_manager.go:1253-1257)"},
		{name: "the workers say a container could run", pod: pod(true, v1.PodFailed, false), finished: true, couldRun: true, want: false,
			why: "ours on top of upstream: never while the pod workers say a container could still run (DeletionSafety)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Manager{safety: tc.couldRun}
			got := m.canBeDeleted(tc.pod, versioned{status: v1.PodStatus{Phase: v1.PodFailed}, finished: tc.finished})
			if got != tc.want {
				t.Errorf("canBeDeleted(deletionTimestamp=%v, mirror=%v, apiserver phase %s, finished=%v, couldRun=%v) = %v, want %v: %s (upstream v1.36.3)",
					tc.pod.DeletionTimestamp != nil, kubetypes.IsMirrorPod(tc.pod), tc.pod.Status.Phase, tc.finished, bool(tc.couldRun), got, tc.want, tc.why)
			}
		})
	}
}

// cond is a condition with a status and, optionally, a reason.
func cond(t v1.PodConditionType, s v1.ConditionStatus, reason ...string) v1.PodCondition {
	c := v1.PodCondition{Type: t, Status: s}
	if len(reason) > 0 {
		c.Reason = reason[0]
	}
	return c
}

// conds prints conditions as "Type=Status(Reason)" in order.
func conds(cs []v1.PodCondition) string {
	var s []string
	for _, c := range cs {
		x := fmt.Sprintf("%s=%s", c.Type, c.Status)
		if c.Reason != "" {
			x += "(" + c.Reason + ")"
		}
		s = append(s, x)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// TestMergePodStatus: what the kubelet posts, made of its own status and
// the apiserver's, as upstream's mergePodStatus does (pkg/kubelet/status/
// status_manager.go:1359-1434, v1.36.3).
func TestMergePodStatus(t *testing.T) {
	const gate v1.PodConditionType = "example.com/gate" // a readiness gate's, set by a controller
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Generation: 3}}
	running := func(cs ...v1.PodCondition) v1.PodStatus {
		return v1.PodStatus{Phase: v1.PodRunning, Reason: "", Message: "", Conditions: cs}
	}
	failed := func(cs ...v1.PodCondition) v1.PodStatus {
		return v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted", Message: "The node was low on memory.", Conditions: cs}
	}
	for _, tc := range []struct {
		name     string
		old      v1.PodStatus // the apiserver's
		next     v1.PodStatus // ours
		couldRun bool
		want     string // "phase reason conditions"
		why      string
	}{
		{name: "conditions: the controller's kept, the kubelet's ours",
			old:  running(cond(gate, v1.ConditionTrue), cond(v1.PodReady, v1.ConditionFalse)),
			next: running(cond(v1.PodInitialized, v1.ConditionTrue), cond(v1.PodReady, v1.ConditionTrue)),
			want: "Running  [example.com/gate=True Initialized=True Ready=True]",
			why:  "old's conditions the kubelet does not own come first and stay (here a readiness gate's), then the kubelet's own from the new status; old's Ready is replaced (pkg/kubelet/status/status_manager.go:1360-1372)"},
		{name: "conditions: ours that the kubelet does not own are dropped",
			old:  running(),
			next: running(cond(v1.PodReady, v1.ConditionTrue), cond(gate, v1.ConditionFalse)),
			want: "Running  [Ready=True]",
			why:  "a condition the kubelet does not own is never sent from its status, only kept from the apiserver's (kubetypes.PodConditionByKubelet, pkg/kubelet/status/status_manager.go:1370-1392)"},
		{name: "terminal while a container could run: held back",
			old: running(), next: failed(), couldRun: true,
			want: "Running  []",
			why:  "a move to a terminal phase waits until no container could run: phase, reason and message stay the apiserver's (pkg/kubelet/status/status_manager.go:1411-1417)"},
		{name: "terminal, every container stopped: sent",
			old: running(), next: failed(),
			want: "Failed Evicted []",
			why:  "with no container that could run, the terminal phase and its reason are sent (pkg/kubelet/status/status_manager.go:1411-1417)"},
		{name: "already terminal: nothing held back",
			old: failed(), next: failed(), couldRun: true,
			want: "Failed Evicted []",
			why:  "only a move INTO a terminal phase is held back (transitioningToTerminalPhase, pkg/kubelet/status/status_manager.go:1368, 1411)"},
		{name: "DisruptionTarget with the terminal phase",
			old:  running(cond(v1.DisruptionTarget, v1.ConditionFalse)),
			next: failed(cond(v1.DisruptionTarget, v1.ConditionTrue, "TerminationByKubelet")),
			want: "Failed Evicted [DisruptionTarget=True(TerminationByKubelet)]",
			why:  "DisruptionTarget, shared with the control plane, is sent (replacing the apiserver's) together with the move to a terminal phase (pkg/kubelet/status/status_manager.go:1370-1392)"},
		{name: "DisruptionTarget held back with the phase",
			old:  running(),
			next: failed(cond(v1.DisruptionTarget, v1.ConditionTrue, "TerminationByKubelet")), couldRun: true,
			want: "Running  []",
			why:  "DisruptionTarget is sent only once no container could run (pkg/kubelet/status/status_manager.go:1380)"},
		{name: "DisruptionTarget without a terminal move",
			old:  running(),
			next: running(cond(v1.DisruptionTarget, v1.ConditionTrue, "TerminationByKubelet")),
			want: "Running  []",
			why:  "DisruptionTarget is sent only with the move to a terminal phase (pkg/kubelet/status/status_manager.go:1380)"},
		{name: "Failed is never Ready",
			old:  running(cond(v1.ContainersReady, v1.ConditionTrue), cond(v1.PodReady, v1.ConditionTrue)),
			next: failed(cond(v1.ContainersReady, v1.ConditionTrue), cond(v1.PodReady, v1.ConditionTrue)),
			want: "Failed Evicted [ContainersReady=False(" + kubestatus.PodFailed + ") Ready=False(" + kubestatus.PodFailed + ")]",
			why:  "a terminal status never says Ready: Ready and ContainersReady become False with reason PodFailed (issue 108594; pkg/kubelet/status/status_manager.go:1423-1431)"},
		{name: "Succeeded is never Ready",
			old: running(),
			next: v1.PodStatus{Phase: v1.PodSucceeded,
				Conditions: []v1.PodCondition{cond(v1.PodReady, v1.ConditionTrue), cond(v1.ContainersReady, v1.ConditionFalse)}},
			want: "Succeeded  [Ready=False(" + kubestatus.PodCompleted + ") ContainersReady=False(" + kubestatus.PodCompleted + ")]",
			why:  "with phase Succeeded the reason is PodCompleted, and both conditions are set False when either was True (pkg/kubelet/status/status_manager.go:1423-1431)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mergePodStatus(pod, tc.old, tc.next, tc.couldRun)
			if s := fmt.Sprintf("%s %s %s", got.Phase, got.Reason, conds(got.Conditions)); s != tc.want {
				t.Errorf("mergePodStatus(apiserver %s %s, ours %s %s, couldHaveRunningContainers=%v) = %q, want %q: %s (upstream v1.36.3)",
					tc.old.Phase, conds(tc.old.Conditions), tc.next.Phase, conds(tc.next.Conditions), tc.couldRun, s, tc.want, tc.why)
			}
			if got.Phase == tc.old.Phase && got.Message != tc.old.Message && got.Phase != tc.next.Phase {
				t.Errorf("mergePodStatus kept the phase %s but the message %q, want the apiserver's %q with it (pkg/kubelet/status/status_manager.go:1413-1415, v1.36.3)", got.Phase, got.Message, tc.old.Message)
			}
			if podutil.IsPodPhaseTerminal(got.Phase) {
				for _, c := range got.Conditions {
					want := podutil.CalculatePodConditionObservedGeneration(&tc.old, pod.Generation, c.Type)
					if (c.Type == v1.PodReady || c.Type == v1.ContainersReady) && c.Reason != "" && c.ObservedGeneration != want {
						t.Errorf("%s observedGeneration %d, want %d: podutil.CalculatePodConditionObservedGeneration(old, pod.Generation, %s) (generate.go:293, 309, v1.36.3)", c.Type, c.ObservedGeneration, want, c.Type)
					}
				}
			}
		})
	}

	// The resource claim statuses are the scheduler's and the DRA
	// controller's: always the apiserver's.
	claim := "claim-1"
	old := running()
	old.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &claim}}
	got := mergePodStatus(pod, old, running(), false)
	if len(got.ResourceClaimStatuses) != 1 || got.ResourceClaimStatuses[0].Name != "gpu" {
		t.Errorf("mergePodStatus dropped the apiserver's resourceClaimStatuses: got %+v, want old's: the kubelet neither owns nor changes them (pkg/kubelet/status/status_manager.go:1396-1400, v1.36.3)", got.ResourceClaimStatuses)
	}
}
