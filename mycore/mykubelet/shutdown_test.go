package mykubelet

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestGracefulNodeShutdown: with ShutdownGracePeriod 3 s, the end of Run
// stops every pod with grace min(its own, 3 s) — a container that ignores
// SIGTERM with 30 s of grace is killed after 3 s, one with 2 s after 2 s,
// one that obeys SIGTERM at once — and Run returns once they are all
// stopped, each reported Failed, reason Terminated, with a
// DisruptionTarget condition. No goroutine is left (newNode's check).
func TestGracefulNodeShutdown(t *testing.T) {
	const limit = 3 * time.Second
	n := newNode(t, "t-shutdown")
	ns := n.namespace(t)
	k := n.start(t, Options{ShutdownGracePeriod: limit})

	const stubborn = "trap '' TERM; while true; do sleep 1; done"
	pods := []struct {
		name  string
		grace int64
		sh    string
		exit  int32         // 143: SIGTERM; 137: SIGKILL at the end of the grace period
		after time.Duration // when it must stop, from the start of the shutdown
	}{
		{"polite", 30, "sleep infinity", 143, 0},
		{"stubborn-long", 30, stubborn, 137, limit}, // min(30 s, 3 s)
		{"stubborn-short", 2, stubborn, 137, 2 * time.Second},
	}
	ids := map[string]string{}
	for _, p := range pods {
		n.createPod(t, ns, p.name, p.grace, p.sh)
	}
	for _, p := range pods {
		ids[p.name] = runtimeID(n.runningPod(t, ns, p.name).Status.ContainerStatuses[0])
	}

	began := time.Now()
	k.stop(t)
	t.Logf("Run returned %s after its context ended", k.took.Round(time.Millisecond))
	if k.took < limit-100*time.Millisecond || k.took > limit+5*time.Second {
		t.Errorf("Run returned %s after its context ended, want just over %s: it waits for the pods", k.took, limit)
	}

	for _, p := range pods {
		st := n.containerState(t, ids[p.name])
		if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != p.exit {
			t.Errorf("%s: the mock's container is %s, exit code %d; want EXITED, %d", p.name, st.State, st.ExitCode, p.exit)
			continue
		}
		// The grace periods are the behaviour here: when each one ended.
		stopped := time.Unix(0, st.FinishedAt).Sub(began)
		if stopped < p.after-100*time.Millisecond || stopped > p.after+1500*time.Millisecond {
			t.Errorf("%s stopped %s after the shutdown began, want about %s", p.name, stopped.Round(time.Millisecond), p.after)
		}
	}

	// What the apiserver shows: posted before Run returned.
	for _, p := range pods {
		got, err := n.getPod(ns, p.name)
		if err != nil {
			t.Fatal(err)
		}
		if err := shutDown(got, p.exit); err != nil {
			t.Errorf("%s: %v", p.name, err)
		}
	}
}

// shutDown checks a pod's status says graceful node shutdown stopped it,
// its container with exit code exit.
func shutDown(p *v1.Pod, exit int32) error {
	s := p.Status
	if s.Phase != v1.PodFailed || s.Reason != ShutdownReason || s.Message != ShutdownMessage {
		return fmt.Errorf("phase %s reason %q message %q, want Failed, %q, %q", s.Phase, s.Reason, s.Message, ShutdownReason, ShutdownMessage)
	}
	disrupted := false
	for _, c := range s.Conditions {
		disrupted = disrupted || (c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue && c.Reason == v1.PodReasonTerminationByKubelet)
	}
	if !disrupted {
		return fmt.Errorf("no DisruptionTarget condition (TerminationByKubelet): %v", s.Conditions)
	}
	if len(s.ContainerStatuses) != 1 || s.ContainerStatuses[0].State.Terminated == nil || s.ContainerStatuses[0].State.Terminated.ExitCode != exit {
		return fmt.Errorf("container statuses %v, want main terminated with exit code %d", s.ContainerStatuses, exit)
	}
	return nil
}
