package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/pleg"
	testingclock "k8s.io/utils/clock/testing"

	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/plegruntime"
	"kubelet-labs/mylib/fakecri"
)

// The exercise (README, "Exercise"): predict what one relist of the
// kubelet's PLEG sends when two things happen between two relists, then
// run make check LAB=07 EXERCISE=1. The test runs the kubelet's own PLEG
// (pleg.NewGenericPLEG, on a fake clock, Relist() called by hand as in
// part 1) over the mock and compares.
//
// Write each event as "TYPE CONTAINER", TYPE one of the PLEG's event types
// (ContainerStarted, ContainerDied, ContainerRemoved, ContainerChanged,
// PodSync), in any order; leave a list empty only if you expect no event.
var answer = struct {
	// A: nginx exits and is removed (crictl rm) before the next relist.
	// CONTAINER: nginx. E.g. []string{"ContainerChanged nginx"}.
	ExitedAndRemoved []string
	// B: sidecar exits, and a new sidecar is created and started (as the
	// kubelet restarts a container: same name, attempt 1) before the next
	// relist; the old one is not removed. CONTAINER: "old" or "new".
	Restarted []string
	// Set it to true once you have written both lists.
	Predicted bool
}{}

func TestExercise(t *testing.T) {
	testenv.Exercise(t)
	if !answer.Predicted {
		t.Fatal("you have not predicted yet: write answer.ExitedAndRemoved and answer.Restarted in labs/07-pleg/exercise_test.go, then set answer.Predicted = true")
	}
	t.Setenv("LABS_STATE_DIR", t.TempDir())
	ctx := context.Background()
	rt, err := labruntime.Open(ctx, labruntime.Options{Flags: labruntime.Flags{Kind: labruntime.Mock}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	c := rt.CRI
	ctl := fakecri.NewControlClient(rt.Mock.ControlSocketPath())
	defer ctl.Close()

	// The PLEG as part 1 builds it: a fake clock, Relist() by hand.
	clk := testingclock.NewFakeClock(time.Now())
	events := make(chan *pleg.PodLifecycleEvent, plegChannelCapacity)
	g := pleg.NewGenericPLEG(logr.Discard(), plegruntime.New(c, plegruntime.WithClock(clk)), events,
		&pleg.RelistDuration{RelistPeriod: time.Second, RelistThreshold: time.Minute}, kubecontainer.NewCache(), clk).(*pleg.GenericPLEG)
	relist := func() []*pleg.PodLifecycleEvent {
		clk.Step(time.Second)
		g.Relist()
		var got []*pleg.PodLifecycleEvent
		for len(events) > 0 {
			got = append(got, <-events)
		}
		return got
	}

	pod := cri.Pod{Name: "web", Namespace: "lab07", UID: fmt.Sprintf("lab07-exercise-%d", time.Now().UnixNano())}
	sb, sbCfg, err := c.RunPod(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	start := func(name string, attempt uint32) string {
		cfg := pod.ContainerConfig(cri.Container{Name: name, Image: rt.Image, Command: []string{"sh", "-c", "while true; do sleep 1; done"}})
		cfg.Metadata.Attempt = attempt
		id, err := c.StartContainer(ctx, sb, sbCfg, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	nginx, oldSidecar := start("nginx", 0), start("sidecar", 0)
	relist() // the PLEG has seen both running

	// A: exit and remove between two relists.
	if err := ctl.SetContainerExited(ctx, nginx, 1, ""); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveContainer(ctx, nginx); err != nil {
		t.Fatal(err)
	}
	gotA := named(relist(), map[string]string{nginx: "nginx"})

	// B: a restart between two relists.
	if err := ctl.SetContainerExited(ctx, oldSidecar, 1, ""); err != nil {
		t.Fatal(err)
	}
	newSidecar := start("sidecar", 1)
	gotB := named(relist(), map[string]string{oldSidecar: "old", newSidecar: "new"})

	compare(t, "A (nginx exited and removed within one relist period)", answer.ExitedAndRemoved, gotA)
	compare(t, "B (sidecar restarted within one relist period)", answer.Restarted, gotB)
}

// named writes events as "TYPE CONTAINER" with the names given by ID
// (others by their short ID), sorted.
func named(evs []*pleg.PodLifecycleEvent, names map[string]string) []string {
	var out []string
	for _, ev := range evs {
		id, _ := ev.Data.(string)
		name, ok := names[id]
		if !ok {
			name = fmt.Sprintf("%.13s", id)
		}
		out = append(out, string(ev.Type)+" "+name)
	}
	slices.Sort(out)
	return out
}

func compare(t *testing.T, what string, predicted, got []string) {
	t.Helper()
	var p []string
	for _, s := range predicted {
		p = append(p, strings.Join(strings.Fields(s), " "))
	}
	slices.Sort(p)
	if !slices.EqualFunc(p, got, strings.EqualFold) {
		t.Errorf("%s: you predicted %s; the PLEG sent %s", what, list(p), list(got))
	}
}

func list(s []string) string {
	if len(s) == 0 {
		return "no event"
	}
	return fmt.Sprintf("%d event(s): %s", len(s), strings.Join(s, ", "))
}
