package prober

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/prober/results"
	kubeutil "k8s.io/kubernetes/pkg/kubelet/util"
	"k8s.io/utils/clock"
)

// StatusProvider is where workers find a pod's IP, its containers' IDs
// and whether each has started: the status manager's cache
// (status.Manager satisfies it), as upstream workers read it (worker.go:221).
type StatusProvider interface {
	GetPodStatus(uid types.UID) (v1.PodStatus, bool)
}

// Options configure a Manager. Runner and Status are required.
type Options struct {
	// Runner runs exec probes in a container: CRI ExecSync
	// (kuberuntime.Manager.RunInContainer).
	Runner kubecontainer.CommandRunner
	// Status gives each worker the pod's IP and container IDs.
	Status StatusProvider
	// Liveness, Readiness and Startup are the results caches, shared with
	// the runtime manager (which reads liveness and startup) and the sync
	// loop (which must receive from each one's Updates(): a worker blocks
	// once 20 changes are unread). nil: a new cache (proberesults.NewManager).
	Liveness, Readiness, Startup results.Manager
	// Log gets one line per failed probe and per result change; nil is silent.
	Log func(format string, args ...any)
	// Recorder, if set, records the kubelet's probe events (Unhealthy,
	// ProbeWarning) on the probed container.
	Recorder record.EventRecorder
	// Clock paces the workers (periods, the start-up spread, initial
	// delays); nil: real time. Tests step a fake clock instead of
	// sleeping through periods.
	Clock clock.WithTicker
}

// Manager runs the probes of the node's pods (the kubelet's prober
// manager, prober_manager.go:75-119). Its methods are safe for concurrent use.
type Manager struct {
	o      Options
	log    func(format string, args ...any)
	prober *prober
	start  time.Time // when the node started: see worker.run and isRestart

	mu      sync.RWMutex
	workers map[probeKey]*worker
	stopped bool
	wg      sync.WaitGroup // one per running worker goroutine
}

// probeKey is probeKey (:142): one worker per pod, container and type.
type probeKey struct {
	podUID    types.UID
	container string
	kind      probeType
}

// probeType is probeType (:149).
type probeType int

const (
	liveness probeType = iota
	readiness
	startup
)

func (t probeType) String() string {
	switch t {
	case readiness:
		return "readiness"
	case liveness:
		return "liveness"
	}
	return "startup"
}

// NewManager returns a Manager with no workers.
func NewManager(o Options) *Manager {
	for _, r := range []*results.Manager{&o.Liveness, &o.Readiness, &o.Startup} {
		if *r == nil {
			*r = results.NewManager()
		}
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	m := &Manager{o: o, log: o.Log, prober: newProber(o.Runner, o.Recorder), start: o.Clock.Now(), workers: map[probeKey]*worker{}}
	if m.log == nil {
		m.log = func(string, ...any) {}
	}
	return m
}

// Liveness, Readiness and Startup are the results caches.
func (m *Manager) Liveness() results.Manager  { return m.o.Liveness }
func (m *Manager) Readiness() results.Manager { return m.o.Readiness }
func (m *Manager) Startup() results.Manager   { return m.o.Startup }

// AddPod starts a worker for every probe of the pod's containers and
// sidecars that has none yet (:185-230). The kubelet calls it on every
// SyncPod; a worker that exists is left alone (probe settings of a pod
// never change).
func (m *Manager) AddPod(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return
	}
	for _, c := range append(append([]v1.Container{}, pod.Spec.Containers...), sidecars(pod)...) {
		for kind, spec := range []*v1.Probe{liveness: c.LivenessProbe, readiness: c.ReadinessProbe, startup: c.StartupProbe} {
			if spec == nil {
				continue
			}
			kind := probeType(kind)
			key := probeKey{pod.UID, c.Name, kind}
			if w, ok := m.workers[key]; ok && !w.stopping() {
				continue
			}
			w := newWorker(m, kind, pod, c)
			m.workers[key] = w
			m.wg.Add(1)
			go w.run()
		}
	}
}

// StopLivenessAndStartup stops the pod's liveness and startup probes: a
// pod being terminated must not have a container restarted by a probe
// while it stops (:232-246). Readiness goes on, so the pod turns NotReady.
func (m *Manager) StopLivenessAndStartup(pod *v1.Pod) {
	m.stopWorkers(func(k probeKey) bool { return k.podUID == pod.UID && k.kind != readiness })
}

// RemovePod stops every probe of the pod (:248-262): its containers are
// stopped.
func (m *Manager) RemovePod(pod *v1.Pod) {
	m.stopWorkers(func(k probeKey) bool { return k.podUID == pod.UID })
}

// CleanupPods stops the probes of every pod not in desired (:264-273).
func (m *Manager) CleanupPods(desired map[types.UID]bool) {
	m.stopWorkers(func(k probeKey) bool { return !desired[k.podUID] })
}

// Stop stops every worker and returns once all have exited; a probe in
// flight is cancelled. No worker starts after Stop. While it waits it
// drains the results' update channels, so a worker blocked on a full one
// can finish.
func (m *Manager) Stop() {
	m.mu.Lock()
	m.stopped = true
	for _, w := range m.workers {
		w.stop()
	}
	m.mu.Unlock()
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	for {
		select {
		case <-done:
			return
		case <-m.o.Liveness.Updates():
		case <-m.o.Readiness.Updates():
		case <-m.o.Startup.Updates():
		}
	}
}

// Workers is how many probe workers run now (workerCount, :437).
func (m *Manager) Workers() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.workers)
}

func (m *Manager) stopWorkers(match func(probeKey) bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for k, w := range m.workers {
		if match(k) {
			w.stop()
		}
	}
}

func (m *Manager) getWorker(uid types.UID, container string, kind probeType) (*worker, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	w, ok := m.workers[probeKey{uid, container, kind}]
	return w, ok
}

// removeWorker is called by a worker as it exits (:430). A newer worker
// for the same key (AddPod after a stop) is not removed.
func (m *Manager) removeWorker(w *worker) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := probeKey{w.pod.UID, w.container.Name, w.kind}
	if m.workers[k] == w {
		delete(m.workers, k)
	}
}

// UpdatePodStatus sets Started and Ready of each container status from the
// probe results (:332-420): started once the startup probe succeeded (or
// at once without one); ready once started, running, and the readiness
// probe succeeded (or at once without one). A container whose readiness
// probe has not run yet gets it run now. It is what status.Generate calls
// (GenerateOptions.Probes).
func (m *Manager) UpdatePodStatus(pod *v1.Pod, s *v1.PodStatus) {
	for i := range s.ContainerStatuses {
		c := &s.ContainerStatuses[i]
		started := m.isContainerStarted(pod, c)
		c.Started = &started
		if !started {
			continue
		}
		c.Ready = m.isReady(pod, c, containerSpec(pod.Spec.Containers, c.Name))
	}
	for i := range s.InitContainerStatuses {
		c := &s.InitContainerStatuses[i]
		started := m.isContainerStarted(pod, c)
		c.Started = &started
		ic, ok := kubeutil.GetContainerByIndex(pod.Spec.InitContainers, s.InitContainerStatuses, i)
		if !ok {
			continue
		}
		if !podutil.IsRestartableInitContainer(&ic) {
			// A regular init container is ready once it succeeded.
			if c.State.Terminated != nil && c.State.Terminated.ExitCode == 0 {
				c.Ready = true
			}
			continue
		}
		if started {
			c.Ready = m.isReady(pod, c, &ic)
		}
	}
}

// isContainerStarted (:275-296).
func (m *Manager) isContainerStarted(pod *v1.Pod, c *v1.ContainerStatus) bool {
	if c.State.Running == nil {
		return false
	}
	if r, ok := m.o.Startup.Get(kubecontainer.ParseContainerID(c.ContainerID)); ok {
		return r == results.Success
	}
	// Started before: it stays started (a node restarted; the
	// ChangeContainerStatusOnKubeletRestart gate, off by default, drops this).
	if c.Started != nil && *c.Started {
		return true
	}
	_, probed := m.getWorker(pod.UID, c.Name, startup)
	return !probed
}

// isReady is the readiness part of UpdatePodStatus (:341-375).
func (m *Manager) isReady(pod *v1.Pod, c *v1.ContainerStatus, spec *v1.Container) bool {
	if c.State.Running == nil {
		return false
	}
	if r, ok := m.o.Readiness.Get(kubecontainer.ParseContainerID(c.ContainerID)); ok && r == results.Success {
		return true
	}
	w, probed := m.getWorker(pod.UID, c.Name, readiness)
	ready := !probed // no readiness probe: ready
	if probed {
		w.trigger()
	}
	if spec != nil {
		m.readyOnKubeletRestart(&ready, pod, c, spec)
	}
	return ready
}

// readyOnKubeletRestart is setReadyStateOnKubeletRestart (:301-330): a
// container that ran before this node started and has no result yet keeps
// being ready if the pod was, so a node restart does not flap readiness.
func (m *Manager) readyOnKubeletRestart(ready *bool, pod *v1.Pod, c *v1.ContainerStatus, spec *v1.Container) {
	if c.State.Running == nil || !startedBeforeNode(c.State.Running.StartedAt.Time, m.start) {
		return
	}
	if !*ready {
		if _, ok := m.o.Readiness.Get(kubecontainer.ParseContainerID(c.ContainerID)); !ok {
			*ready = true
		}
	}
	if spec.ReadinessProbe != nil && !podutil.IsPodReady(pod) {
		*ready = false
	}
}

// startedBeforeNode: the container started more than 10 s before this
// node did (kubeletRestartGracePeriod, :448).
func startedBeforeNode(started, nodeStart time.Time) bool {
	return !started.IsZero() && started.Before(nodeStart.Add(-10*time.Second))
}

func sidecars(pod *v1.Pod) []v1.Container {
	var out []v1.Container
	for _, c := range pod.Spec.InitContainers {
		if podutil.IsRestartableInitContainer(&c) {
			out = append(out, c)
		}
	}
	return out
}

func containerSpec(cs []v1.Container, name string) *v1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}
