package plegruntime

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/pleg"
	testingclock "k8s.io/utils/clock/testing"
)

// States a container or sandbox can be in for the tests; "gone" is not in
// the runtime's list at all.
var testStates = map[string]kubecontainer.State{
	"created": kubecontainer.ContainerStateCreated,
	"running": kubecontainer.ContainerStateRunning,
	"exited":  kubecontainer.ContainerStateExited,
	"unknown": kubecontainer.ContainerStateUnknown,
}

// testPod is pod "web" (UID uid-web) with container c1 and sandbox s1 in
// the given states; nil when both are gone (the runtime lists no pod).
func testPod(c1, s1 string) *kubecontainer.Pod {
	p := &kubecontainer.Pod{ID: "uid-web", Name: "web", Namespace: "default"}
	if st, ok := testStates[c1]; ok {
		p.Containers = append(p.Containers, &kubecontainer.Container{ID: kubecontainer.ContainerID{Type: "containerd", ID: "c1"}, Name: "app", State: st})
	}
	if st, ok := testStates[s1]; ok {
		p.Sandboxes = append(p.Sandboxes, &kubecontainer.Container{ID: kubecontainer.ContainerID{Type: "containerd", ID: "s1"}, State: st})
	}
	if len(p.Containers)+len(p.Sandboxes) == 0 {
		return nil
	}
	return p
}

// eventsString prints events as "Type(data)" in order, "none" for none.
func eventsString(events []*pleg.PodLifecycleEvent) string {
	if len(events) == 0 {
		return "none"
	}
	var s []string
	for _, e := range events {
		s = append(s, fmt.Sprintf("%s(%v)", e.Type, e.Data))
	}
	return strings.Join(s, ", ")
}

// TestRelistEvents: the events for one container between two relists, as
// upstream's generateEvents makes them (pkg/kubelet/pleg/generic.go:
// 252-276, v1.36.3).
func TestRelistEvents(t *testing.T) {
	for _, tc := range []struct {
		from, to string // container c1's state, with sandbox s1 running in both
		want     string
		why      string
	}{
		{"gone", "running", "ContainerStarted(c1)", "a container seen running for the first time is ContainerStarted (pkg/kubelet/pleg/generic.go:259-260)"},
		{"created", "running", "ContainerStarted(c1)", "any state to running is ContainerStarted (pkg/kubelet/pleg/generic.go:259-260)"},
		{"running", "exited", "ContainerDied(c1)", "a container that leaves running for exited is ContainerDied (pkg/kubelet/pleg/generic.go:261-262)"},
		{"gone", "exited", "ContainerDied(c1)", "a container that started and exited between two relists is only ContainerDied (pkg/kubelet/pleg/generic.go:261-262)"},
		{"exited", "gone", "ContainerRemoved(c1)", "an exited container removed from the runtime is ContainerRemoved only: its death was reported already (pkg/kubelet/pleg/generic.go:265-269)"},
		{"running", "gone", "ContainerDied(c1), ContainerRemoved(c1)", "a running container that vanished died and was removed: ContainerDied, then ContainerRemoved (pkg/kubelet/pleg/generic.go:265-271)"},
		{"created", "gone", "ContainerDied(c1), ContainerRemoved(c1)", "only an exited container skips ContainerDied when it goes (pkg/kubelet/pleg/generic.go:265-271)"},
		{"gone", "created", "ContainerChanged(c1)", "created counts as unknown (convertState, pkg/kubelet/pleg/generic.go:104-106), and a change to unknown is ContainerChanged (pkg/kubelet/pleg/generic.go:263-264)"},
		{"running", "unknown", "ContainerChanged(c1)", "a change to unknown is ContainerChanged (pkg/kubelet/pleg/generic.go:263-264)"},
		{"created", "unknown", "none", "created and unknown are the same PLEG state, unknown: no change, no event (pkg/kubelet/pleg/generic.go:104-113, 253-255)"},
		{"running", "running", "none", "no change, no event (pkg/kubelet/pleg/generic.go:253-255)"},
		{"exited", "exited", "none", "no change, no event (pkg/kubelet/pleg/generic.go:253-255)"},
	} {
		t.Run(tc.from+"→"+tc.to, func(t *testing.T) {
			events := RelistEvents(testPod(tc.from, "running"), testPod(tc.to, "running"))
			if got := eventsString(events); got != tc.want {
				t.Errorf("RelistEvents(container %s→%s) = %s, want %s: %s (upstream v1.36.3)", tc.from, tc.to, got, tc.want, tc.why)
			}
			for _, e := range events {
				if e.ID != "uid-web" {
					t.Errorf("event %s has pod ID %q, want the pod's UID uid-web (pkg/kubelet/pleg/generic.go:480-490, v1.36.3)", e.Type, e.ID)
				}
			}
		})
	}

	// Sandboxes are containers to the PLEG (getContainersFromPods,
	// generic.go:472-475).
	if got, want := eventsString(RelistEvents(testPod("running", "running"), testPod("running", "exited"))), "ContainerDied(s1)"; got != want {
		t.Errorf("RelistEvents(sandbox running→exited) = %s, want %s: the PLEG diffs sandboxes as it does containers, Data is the sandbox's ID (pkg/kubelet/pleg/generic.go:472-475, v1.36.3)", got, want)
	}

	// A pod that appears, and one that is gone: the other side is nil.
	if got, want := eventsString(RelistEvents(nil, testPod("running", "running"))), "ContainerStarted(c1), ContainerStarted(s1)"; got != want {
		t.Errorf("RelistEvents(nil, a new pod) = %s, want %s: every container, then every sandbox, of a pod not seen before is new; old may be nil (pkg/kubelet/pleg/generic.go:454-478, 585-590, v1.36.3)", got, want)
	}
	gone := RelistEvents(testPod("exited", "running"), nil)
	if got, want := eventsString(gone), "ContainerRemoved(c1), ContainerDied(s1), ContainerRemoved(s1)"; got != want {
		t.Errorf("RelistEvents(a pod, nil) = %s, want %s: a pod gone from the runtime is every container and sandbox gone; cur may be nil (pkg/kubelet/pleg/generic.go:454-478, 585-590, v1.36.3)", got, want)
	}
	for _, e := range gone {
		if e.ID != "uid-web" {
			t.Errorf("event %s of a pod gone has pod ID %q, want old's UID uid-web (pkg/kubelet/pleg/generic.go:481-485, v1.36.3)", e.Type, e.ID)
		}
	}
	if got := RelistEvents(nil, nil); len(got) != 0 {
		t.Errorf("RelistEvents(nil, nil) = %s, want none", eventsString(got))
	}

	// Order: old's containers, old's sandboxes, then what only cur has.
	old := testPod("running", "running")
	cur := &kubecontainer.Pod{ID: "uid-web", Name: "web", Namespace: "default",
		Containers: []*kubecontainer.Container{
			{ID: kubecontainer.ContainerID{Type: "containerd", ID: "c2"}, Name: "app", State: kubecontainer.ContainerStateRunning},
			{ID: kubecontainer.ContainerID{Type: "containerd", ID: "c1"}, Name: "app", State: kubecontainer.ContainerStateExited},
		},
		Sandboxes: []*kubecontainer.Container{{ID: kubecontainer.ContainerID{Type: "containerd", ID: "s1"}, State: kubecontainer.ContainerStateExited}},
	}
	if got, want := eventsString(RelistEvents(old, cur)), "ContainerDied(c1), ContainerDied(s1), ContainerStarted(c2)"; got != want {
		t.Errorf("RelistEvents(restart: c1 and s1 exited, c2 new) = %s, want %s: the events come in the order of getContainersFromPods(old, cur) — old's containers, old's sandboxes, then cur's not seen yet (pkg/kubelet/pleg/generic.go:454-478, v1.36.3)", got, want)
	}
}

// listRuntime is the kubecontainer.Runtime the kubelet's PLEG needs for a
// relist: GetPods returns the list the test sets, GetPodStatus an empty
// status. Any other method panics (the interface is embedded nil).
type listRuntime struct {
	kubecontainer.Runtime
	pods []*kubecontainer.Pod
}

func (r *listRuntime) GetPods(context.Context, bool) ([]*kubecontainer.Pod, error) {
	return r.pods, nil
}

func (r *listRuntime) GetPodStatus(_ context.Context, p *kubecontainer.Pod) (*kubecontainer.PodStatus, error) {
	return &kubecontainer.PodStatus{ID: p.ID, Name: p.Name, Namespace: p.Namespace}, nil
}

// TestRelistEventsAsTheKubeletsPLEG: for every pair of states of a
// container and its sandbox, the kubelet's own GenericPLEG relists twice
// (pleg.NewGenericPLEG, pkg/kubelet/pleg/generic.go:135, v1.36.3); what it
// sends must be what RelistEvents returns, without ContainerChanged, which
// the PLEG does not send (generic.go:391-394).
func TestRelistEventsAsTheKubeletsPLEG(t *testing.T) {
	states := []string{"gone", "created", "running", "exited", "unknown"}
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	failures := 0
	for _, c0 := range states {
		for _, s0 := range states {
			for _, c1 := range states {
				for _, s1 := range states {
					rt := &listRuntime{}
					ch := make(chan *pleg.PodLifecycleEvent, 100)
					g := pleg.NewGenericPLEG(logr.Discard(), rt, ch, &pleg.RelistDuration{RelistPeriod: time.Second, RelistThreshold: time.Minute},
						kubecontainer.NewCache(), clk).(*pleg.GenericPLEG)
					var prev *kubecontainer.Pod
					for i, p := range []*kubecontainer.Pod{testPod(c0, s0), testPod(c1, s1)} {
						rt.pods = nil
						if p != nil {
							rt.pods = []*kubecontainer.Pod{p}
						}
						g.Relist()
						var sent []*pleg.PodLifecycleEvent
						for len(ch) > 0 {
							sent = append(sent, <-ch)
						}
						var ours []*pleg.PodLifecycleEvent
						for _, e := range RelistEvents(prev, p) {
							if e.Type != pleg.ContainerChanged {
								ours = append(ours, e)
							}
						}
						want, got := eventsString(sent), eventsString(ours)
						if got != want && failures < 10 {
							failures++
							what := fmt.Sprintf("the first relist, of (container %s, sandbox %s), RelistEvents(nil, pod)", c0, s0)
							if i == 1 {
								what = fmt.Sprintf("a relist of (container %s, sandbox %s) after (container %s, sandbox %s), RelistEvents(old, cur)", c1, s1, c0, s0)
							}
							t.Errorf("%s without ContainerChanged = %s; the kubelet's GenericPLEG sent %s for the same lists (pkg/kubelet/pleg/generic.go:336-418, v1.36.3)",
								what, got, want)
						}
						for _, e := range ours {
							if e.ID != types.UID("uid-web") {
								if failures < 10 {
									failures++
									t.Errorf("RelistEvents sent %s with pod ID %q, want uid-web", e.Type, e.ID)
								}
							}
						}
						prev = p
					}
				}
			}
		}
	}
}
