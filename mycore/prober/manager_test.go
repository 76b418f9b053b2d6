package prober_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	remote "k8s.io/cri-client/pkg"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/prober/results"
	testingclock "k8s.io/utils/clock/testing"
	utilexec "k8s.io/utils/exec"

	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/prober"
)

// statuses stands in for the status manager's cache. Every probe round of
// a worker starts by reading it, so reads counts rounds.
type statuses struct {
	mu    sync.Mutex
	m     map[types.UID]v1.PodStatus
	reads int
}

func (s *statuses) GetPodStatus(uid types.UID) (v1.PodStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	st, ok := s.m[uid]
	return *st.DeepCopy(), ok
}

func (s *statuses) rounds() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

// set records one running container, started or not, with the given ID.
func (s *statuses) set(pod *v1.Pod, id string, started bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[pod.UID] = v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.2", ContainerStatuses: []v1.ContainerStatus{{
		Name: "app", ContainerID: "fake://" + id, Started: &started,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Now()}},
	}}}
}

// runner is the container runtime's ExecSync: answer decides each
// command's outcome; calls counts them by command.
type runner struct {
	mu     sync.Mutex
	calls  map[string]int
	answer func(ctx context.Context, cmd string) error
}

func (r *runner) RunInContainer(ctx context.Context, _ kubecontainer.ContainerID, cmd []string, _ time.Duration) ([]byte, error) {
	r.mu.Lock()
	r.calls[cmd[0]]++
	answer := r.answer
	r.mu.Unlock()
	return nil, answer(ctx, cmd[0])
}

func (r *runner) count(cmd string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[cmd]
}

func (r *runner) setAnswer(f func(ctx context.Context, cmd string) error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answer = f
}

var (
	exitOK   error = nil
	exitFail error = utilexec.CodeExitError{Err: fmt.Errorf("exit 1"), Code: 1}
)

func exec(cmd string, failureThreshold int32) *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{cmd}}},
		PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: failureThreshold}
}

func newPod(name string, c v1.Container) *v1.Pod {
	c.Name = "app"
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid")},
		Spec: v1.PodSpec{Containers: []v1.Container{c}, RestartPolicy: v1.RestartPolicyAlways}}
}

type env struct {
	m   *prober.Manager
	st  *statuses
	run *runner
	clk *testingclock.FakeClock
}

// newEnv starts a manager over fakes and stops it at the end of the test,
// then checks no goroutine is left. Its clock is fake and stands a minute
// after the node started, so a new worker probes at once (no start-up
// spread) and then once per tick.
func newEnv(t *testing.T, answer func(ctx context.Context, cmd string) error) *env {
	ignore := goleak.IgnoreCurrent()
	e := &env{st: &statuses{m: map[types.UID]v1.PodStatus{}}, run: &runner{calls: map[string]int{}, answer: answer},
		clk: testingclock.NewFakeClock(time.Now())}
	e.m = prober.NewManager(prober.Options{Runner: e.run, Status: e.st, Log: t.Logf, Clock: e.clk})
	e.clk.Step(time.Minute)
	t.Cleanup(func() {
		e.m.Stop()
		if n := e.m.Workers(); n != 0 {
			t.Errorf("%d workers after Stop", n)
		}
		goleak.VerifyNone(t, ignore)
	})
	return e
}

// tick moves the clock one probe period (1 s) and waits until the pod's
// workers (how many) have each begun their next round. Waiting for the
// round also means the tick was taken, so the next tick is not lost to a
// full ticker channel; and a worker's round N has finished once its round
// N+1 has begun.
func (e *env) tick(t *testing.T, workers int) {
	t.Helper()
	want := e.st.rounds() + workers
	e.clk.Step(time.Second)
	testenv.PollTrue(t, "the workers' next round", 5*time.Second, func() bool { return e.st.rounds() >= want })
}

// next is the next update of a results cache, or a failure after timeout.
func next(t *testing.T, r results.Manager, timeout time.Duration) results.Update {
	t.Helper()
	select {
	case u := <-r.Updates():
		return u
	case <-time.After(timeout):
		t.Fatalf("no probe result update within %s", timeout)
	}
	return results.Update{}
}

// A liveness probe turns Failure only after failureThreshold failures in a
// row, then stops probing the container until it is replaced; the new
// container starts from Success again.
func TestLivenessFailureThreshold(t *testing.T) {
	e := newEnv(t, func(context.Context, string) error { return exitFail })
	pod := newPod("live", v1.Container{LivenessProbe: exec("alive", 3)})
	e.st.set(pod, "c1", true)
	e.m.AddPod(pod)

	// Round 1 at once: the initial Success, then the first failed probe.
	if u := next(t, e.m.Liveness(), 5*time.Second); u.Result != results.Success || u.ContainerID.ID != "c1" {
		t.Fatalf("first update %+v, want the initial Success of c1", u)
	}
	e.tick(t, 1) // failure 2
	e.tick(t, 1) // failure 3
	if u := next(t, e.m.Liveness(), 5*time.Second); u.Result != results.Failure {
		t.Fatalf("update %+v, want Failure", u)
	}
	if n := e.run.count("alive"); n != 3 {
		t.Errorf("Failure after %d probes, want 3 (failureThreshold)", n)
	}
	for range 3 { // three more periods, the last two rounds over
		e.tick(t, 1)
	}
	if n := e.run.count("alive"); n != 3 {
		t.Errorf("%d probes: the worker kept probing a container that failed liveness", n)
	}

	// The kubelet restarted it: a new container ID, probed again.
	e.run.setAnswer(func(context.Context, string) error { return exitOK })
	e.st.set(pod, "c2", true)
	e.tick(t, 1)
	if u := next(t, e.m.Liveness(), 5*time.Second); u.Result != results.Success || u.ContainerID.ID != "c2" {
		t.Fatalf("update %+v, want the initial Success of c2", u)
	}
	if r, ok := e.m.Liveness().Get(kubecontainer.ContainerID{Type: "fake", ID: "c1"}); ok {
		t.Errorf("c1 still has a result (%v): the replaced container's result must go", r)
	}
	e.tick(t, 1)
	e.tick(t, 1)
	if n := e.run.count("alive"); n < 5 {
		t.Errorf("c2 was not probed every period (%d probes in all, want 3 + at least 2)", n)
	}
}

// A startup probe gates the others: until it succeeds, the readiness probe
// never runs and the container is neither started nor ready.
func TestStartupGatesReadiness(t *testing.T) {
	var mu sync.Mutex
	startedUp := false
	e := newEnv(t, func(_ context.Context, cmd string) error {
		mu.Lock()
		defer mu.Unlock()
		if cmd == "started" && !startedUp {
			return exitFail
		}
		return exitOK
	})
	pod := newPod("slow", v1.Container{StartupProbe: exec("started", 30), ReadinessProbe: exec("ready", 1)})
	e.st.set(pod, "c1", false)
	e.m.AddPod(pod)

	if u := next(t, e.m.Startup(), 5*time.Second); u.Result != results.Unknown {
		t.Fatalf("first startup update %+v, want the initial Unknown", u)
	}
	if u := next(t, e.m.Readiness(), 5*time.Second); u.Result != results.Failure {
		t.Fatalf("first readiness update %+v, want the initial Failure", u)
	}
	e.tick(t, 2) // both workers: startup probes again, readiness waits
	e.tick(t, 2)
	if n := e.run.count("ready"); n != 0 {
		t.Fatalf("the readiness probe ran %d times before the startup probe succeeded", n)
	}
	if e.run.count("started") < 2 {
		t.Fatalf("the startup probe did not run")
	}
	st, _ := e.st.GetPodStatus(pod.UID)
	e.m.UpdatePodStatus(pod, &st)
	if cs := st.ContainerStatuses[0]; *cs.Started || cs.Ready {
		t.Errorf("started %v ready %v before the startup probe succeeded", *cs.Started, cs.Ready)
	}

	mu.Lock()
	startedUp = true
	mu.Unlock()
	e.tick(t, 2)
	if u := next(t, e.m.Startup(), 5*time.Second); u.Result != results.Success {
		t.Fatalf("startup update %+v, want Success", u)
	}
	// The kubelet's loop now calls SetContainerStartup: the status says started.
	e.st.set(pod, "c1", true)
	st, _ = e.st.GetPodStatus(pod.UID)
	e.m.UpdatePodStatus(pod, &st) // not ready yet: this triggers a readiness probe now
	if cs := st.ContainerStatuses[0]; !*cs.Started || cs.Ready {
		t.Errorf("after startup: started %v ready %v, want started, not yet ready", *cs.Started, cs.Ready)
	}
	if u := next(t, e.m.Readiness(), 5*time.Second); u.Result != results.Success {
		t.Fatalf("readiness update %+v, want Success", u)
	}
	st, _ = e.st.GetPodStatus(pod.UID)
	e.m.UpdatePodStatus(pod, &st)
	if !st.ContainerStatuses[0].Ready {
		t.Errorf("not ready after the readiness probe succeeded")
	}
}

// An exec probe that runs past timeoutSeconds is a failure, not an error:
// the runtime ends it and cri-client says ErrCommandTimedOut.
func TestExecTimeoutIsFailure(t *testing.T) {
	e := newEnv(t, func(context.Context, string) error {
		return fmt.Errorf("%w: %q timed out after 1s", remote.ErrCommandTimedOut, "sleep 5")
	})
	pod := newPod("stuck", v1.Container{LivenessProbe: exec("sleep", 1)})
	e.st.set(pod, "c1", true)
	e.m.AddPod(pod)
	next(t, e.m.Liveness(), 5*time.Second) // the initial Success
	if u := next(t, e.m.Liveness(), 5*time.Second); u.Result != results.Failure {
		t.Fatalf("update %+v, want Failure", u)
	}
}

// A container without probes is started and ready as soon as it runs.
func TestNoProbesReady(t *testing.T) {
	e := newEnv(t, func(context.Context, string) error { return exitOK })
	pod := newPod("plain", v1.Container{})
	e.st.set(pod, "c1", false)
	e.m.AddPod(pod)
	if n := e.m.Workers(); n != 0 {
		t.Fatalf("%d workers for a pod without probes", n)
	}
	st, _ := e.st.GetPodStatus(pod.UID)
	e.m.UpdatePodStatus(pod, &st)
	if cs := st.ContainerStatuses[0]; !*cs.Started || !cs.Ready {
		t.Errorf("started %v ready %v, want both", *cs.Started, cs.Ready)
	}
}

// One goroutine per probe; RemovePod ends a pod's, Stop ends all — even a
// probe in flight, and even with nobody reading the result updates.
func TestWorkersEnd(t *testing.T) {
	e := newEnv(t, func(ctx context.Context, cmd string) error {
		if cmd == "hang" {
			<-ctx.Done() // a probe that would run for a long time
			return ctx.Err()
		}
		return exitFail
	})
	a := newPod("a", v1.Container{LivenessProbe: exec("x", 1), ReadinessProbe: exec("x", 1), StartupProbe: exec("x", 1)})
	b := newPod("b", v1.Container{LivenessProbe: exec("hang", 1), ReadinessProbe: exec("x", 1)})
	for _, p := range []*v1.Pod{a, b} {
		e.st.set(p, string(p.UID), true)
		e.m.AddPod(p)
		e.m.AddPod(p) // again, as every SyncPod does: no second worker
	}
	if n := e.m.Workers(); n != 5 {
		t.Fatalf("%d workers, want 5 (one per probe)", n)
	}
	e.m.RemovePod(a)
	testenv.PollTrue(t, "b's 2 workers left after RemovePod(a)", 5*time.Second, func() bool { return e.m.Workers() == 2 })
	testenv.PollTrue(t, "b's liveness probe in flight", 5*time.Second, func() bool { return e.run.count("hang") == 1 })
	start := time.Now()
	e.m.Stop()
	t.Logf("Stop with a probe in flight took %s", time.Since(start).Round(time.Millisecond))
	e.m.AddPod(a) // after Stop: nothing starts
	if n := e.m.Workers(); n != 0 {
		t.Fatalf("%d workers after Stop", n)
	}
}
