package prober

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/kubernetes/pkg/features"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/prober/results"
)

// worker probes one container with one probe, every periodSeconds, until
// it is stopped or the container will not run again (worker.go:39-85).
type worker struct {
	m         *Manager
	kind      probeType
	pod       *v1.Pod
	container v1.Container
	spec      *v1.Probe
	results   results.Manager
	// initial is the result a new container has before its first probe
	// (:113-125): liveness Success (alive until proven dead), readiness
	// Failure (not ready until proven ready), startup Unknown.
	initial results.Result

	ctx      context.Context // cancelled by stop: ends a probe in flight
	cancel   context.CancelFunc
	stopOnce sync.Once
	manual   chan struct{} // manualTriggerCh: probe now

	// Probing state, owned by the worker's goroutine.
	containerID kubecontainer.ContainerID
	lastResult  results.Result
	resultRun   int  // how many times in a row lastResult came
	onHold      bool // stop probing until the container is replaced
}

func newWorker(m *Manager, kind probeType, pod *v1.Pod, c v1.Container) *worker {
	w := &worker{m: m, kind: kind, pod: pod, container: c, manual: make(chan struct{}, 1)}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	switch kind {
	case liveness:
		w.spec, w.results, w.initial = c.LivenessProbe, m.o.Liveness, results.Success
	case readiness:
		w.spec, w.results, w.initial = c.ReadinessProbe, m.o.Readiness, results.Failure
	case startup:
		w.spec, w.results, w.initial = c.StartupProbe, m.o.Startup, results.Unknown
	}
	return w
}

// stop ends the worker; safe to call more than once (:206).
func (w *worker) stop() { w.stopOnce.Do(w.cancel) }

func (w *worker) stopping() bool { return w.ctx.Err() != nil }

// trigger asks for a probe now, without blocking (UpdatePodStatus uses it
// when a container's readiness is not known yet).
func (w *worker) trigger() {
	select {
	case w.manual <- struct{}{}:
	default:
	}
}

// run is the worker's goroutine (:158-202): probe, wait for the next tick
// (or a manual trigger, or stop), again.
func (w *worker) run() {
	defer w.m.wg.Done()
	defer w.m.removeWorker(w)
	clk := w.m.o.Clock
	period := time.Duration(max(w.spec.PeriodSeconds, 1)) * time.Second

	// Right after the node starts, spread the workers of pods that were
	// already running over one period instead of probing all at once.
	if period > clk.Since(w.m.start) {
		t := clk.NewTimer(rand.N(period))
		select {
		case <-w.ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
	ticker := clk.NewTicker(period)
	defer func() { ticker.Stop() }()
	defer func() {
		if !w.containerID.IsEmpty() {
			w.results.Remove(w.containerID)
		}
	}()
	for w.doProbe() {
		select {
		case <-w.ctx.Done():
			return
		case <-ticker.C():
		case <-w.manual:
			// The next periodic probe counts from now (upstream:
			// probeTicker.Reset). clock.Ticker has no Reset: a new one.
			ticker.Stop()
			ticker = clk.NewTicker(period)
		}
	}
}

// doProbe probes the container once and records the result; false means
// the worker is done (:215-394).
func (w *worker) doProbe() (keepGoing bool) {
	status, ok := w.m.o.Status.GetPodStatus(w.pod.UID)
	if !ok {
		return true // no status yet (or the pod is gone: RemovePod stops us)
	}
	if status.Phase == v1.PodFailed || status.Phase == v1.PodSucceeded {
		return false // the pod is over
	}
	c, ok := podutil.GetContainerStatus(status.ContainerStatuses, w.container.Name)
	if !ok || c.ContainerID == "" {
		if c, ok = podutil.GetContainerStatus(status.InitContainerStatuses, w.container.Name); !ok || c.ContainerID == "" {
			return true // not created yet
		}
	}
	sidecar := podutil.IsRestartableInitContainer(&w.container) && containerSpec(w.pod.Spec.InitContainers, w.container.Name) != nil

	// A new container (first one, or a restart): start over from the
	// initial result (:250-292).
	if w.containerID.String() != c.ContainerID {
		if !w.containerID.IsEmpty() {
			w.results.Remove(w.containerID)
		}
		w.containerID = kubecontainer.ParseContainerID(c.ContainerID)
		// A container that ran before this node started keeps its state
		// until probed: a node restart must not make a Ready pod NotReady.
		restarted := c.State.Running != nil && startedBeforeNode(c.State.Running.StartedAt.Time, w.m.start)
		if sidecar && w.kind == startup && c.Started != nil && *c.Started {
			w.results.Set(w.containerID, results.Success, w.pod)
		}
		if !restarted {
			w.results.Set(w.containerID, w.initial, w.pod)
		}
		w.onHold = false
	}
	if w.onHold {
		return true // failed liveness or finished startup: wait for a new container
	}

	if c.State.Running == nil {
		if !w.containerID.IsEmpty() {
			w.results.Set(w.containerID, results.Failure, w.pod)
		}
		// Keep going only if the container may run again (:303-314).
		if c.State.Terminated == nil || sidecar {
			return true
		}
		if utilfeature.DefaultFeatureGate.Enabled(features.ContainerRestartRules) {
			return podutil.ContainerShouldRestart(w.container, w.pod.Spec, c.State.Terminated.ExitCode)
		}
		return w.pod.Spec.RestartPolicy != v1.RestartPolicyNever
	}

	// A pod being deleted: liveness and startup say Success once and stop,
	// so nothing restarts a container that is being stopped (:317-328).
	if w.pod.DeletionTimestamp != nil && (w.kind == liveness || w.kind == startup) {
		w.results.Set(w.containerID, results.Success, w.pod)
		return false
	}
	if int32(w.m.o.Clock.Since(c.State.Running.StartedAt.Time).Seconds()) < w.spec.InitialDelaySeconds {
		return true
	}
	// The startup probe gates the others (:335-346).
	if c.Started != nil && *c.Started {
		if w.kind == startup {
			return true // started: nothing left to find out
		}
	} else if w.kind != startup {
		return true // not started yet: liveness and readiness wait
	}

	began := w.m.o.Clock.Now()
	result, output, err := w.m.prober.probe(w.ctx, w.kind, w.pod, status, w.container, w.containerID)
	took := w.m.o.Clock.Since(began).Round(time.Millisecond)
	if err != nil {
		// The probe could not run (not: it failed); throw it away.
		if w.ctx.Err() == nil {
			w.m.log("probe   %s %s: error after %s, result ignored: %v", w.kind, w.name(), took, err)
		}
		return true
	}

	if w.lastResult == result {
		w.resultRun++
	} else {
		w.lastResult, w.resultRun = result, 1
	}
	threshold := w.spec.SuccessThreshold
	if result == results.Failure {
		threshold = w.spec.FailureThreshold
		if int32(w.resultRun) <= threshold { // past it, a failure changes nothing: quiet
			w.m.log("probe   %s %s: failure %d/%d (%s): %s", w.kind, w.name(), w.resultRun, threshold, took, oneLine(output))
		}
	}
	if int32(w.resultRun) < max(threshold, 1) {
		return true // not enough in a row yet: the result stays
	}
	if prev, ok := w.results.Get(w.containerID); !ok || prev != result {
		w.m.log("probe   %s %s: %s → %s (%d in a row; %s)", w.kind, w.name(), resultString(prev, ok), resultString(result, true), w.resultRun, took)
	}
	w.results.Set(w.containerID, result, w.pod)

	if (w.kind == liveness && result == results.Failure) || w.kind == startup {
		// Failed liveness: the container will be killed; probing it while
		// it stops helps nobody. Startup: decided. Wait for a new
		// container (:380-391).
		w.onHold, w.resultRun = true, 0
	}
	return true
}

func (w *worker) name() string {
	return w.pod.Namespace + "/" + w.pod.Name + " " + w.container.Name
}

// resultString names a result; ok false: there was none.
func resultString(r results.Result, ok bool) string {
	switch {
	case !ok:
		return "none"
	case r == results.Unknown:
		return "Unknown"
	}
	return r.String()
}

// oneLine shortens probe output for a log line.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	if s == "" {
		return "(no output)"
	}
	return s
}
