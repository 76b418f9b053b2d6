package virtualnode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

// Runtime is what stands where the CRI runtime and the PLEG would be. It runs each container as a goroutine of this process (the
// interpreter), keeps the state of every pod it was asked to run, and —
// because it knows every change the moment it happens — writes each one
// into the pod cache itself and tells the sync loop, instead of being
// relisted by a PLEG.
type Runtime struct {
	cache  kubecontainer.Cache
	run    func(ctx context.Context, name string, argv []string) Result
	events chan types.UID // a pod changed: the sync loop syncs it (as PLEG events)
	logf   func(format string, args ...any)

	mu   sync.Mutex
	pods map[types.UID]*virtualPod
	wg   sync.WaitGroup // one per running container
}

// virtualPod is one pod's record: a "sandbox" (the pod exists here) and
// its containers.
type virtualPod struct {
	name, namespace string
	sandboxID       string
	created         time.Time
	ready           bool // the sandbox: true until the pod is stopped
	containers      map[string]*task
}

// task is one container: a run of the interpreter.
type task struct {
	id, name, image string
	state           kubecontainer.State
	created         time.Time
	started         time.Time
	finished        time.Time
	exitCode        int
	reason, message string
	cancel          context.CancelFunc
	done            chan struct{}
}

// NewRuntime makes a runtime that runs each container with run (an
// Interpreter's Run) and writes every change into cache. Close it to stop
// every container.
func NewRuntime(cache kubecontainer.Cache, run func(context.Context, string, []string) Result, logf func(string, ...any)) *Runtime {
	return &Runtime{
		cache: cache, run: run, logf: logf,
		events: make(chan types.UID, 1000), // plegChannelCapacity (kubelet.go:205)
		pods:   map[types.UID]*virtualPod{},
	}
}

// KeepCacheFresh moves the cache's "complete as of" clock forward every
// period until ctx ends. The PLEG does this after every relist
// (pleg/generic.go:329, cache.UpdateTime): a worker waiting for a state newer than
// its last sync is let through by it even when nothing changed. Our
// writes are synchronous, so the cache is complete at every instant and
// the period only bounds how long such a worker waits.
func (r *Runtime) KeepCacheFresh(ctx context.Context, period time.Duration) {
	r.cache.UpdateTime(time.Now())
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			r.cache.UpdateTime(now)
		}
	}
}

// Start runs container c of pod: the equivalent of RunPodSandbox (once
// per pod), then CreateContainer + StartContainer.
func (r *Runtime) Start(pod *v1.Pod, c v1.Container) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.podLocked(pod)
	if _, ok := p.containers[c.Name]; ok {
		return // never twice: this node runs each container once
	}
	ctx, cancel := context.WithCancel(context.Background())
	now := time.Now()
	t := &task{id: newID(), name: c.Name, image: c.Image, state: kubecontainer.ContainerStateRunning,
		created: now, started: now, cancel: cancel, done: make(chan struct{})}
	p.containers[c.Name] = t
	argv := append(append([]string{}, c.Command...), c.Args...)
	who := fmt.Sprintf("%s/%s %s", pod.Namespace, pod.Name, c.Name)
	r.logf("runtime %s: started %q (container %s)", who, argv, t.id[:12])
	r.wg.Add(1)
	go func(uid types.UID) {
		defer r.wg.Done()
		defer close(t.done)
		res := r.run(ctx, who, argv)
		r.mu.Lock()
		t.state, t.finished = kubecontainer.ContainerStateExited, time.Now()
		t.exitCode, t.reason, t.message = res.ExitCode, res.Reason(), res.Message
		r.publishLocked(uid)
		r.mu.Unlock()
		r.logf("runtime %s: exited %d after %s: %s", who, res.ExitCode, t.finished.Sub(t.started).Round(time.Millisecond), res.Message)
	}(pod.UID)
	r.publishLocked(pod.UID)
}

// Has says whether container name of pod uid was ever started here.
func (r *Runtime) Has(uid types.UID, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pods[uid]
	return ok && p.containers[name] != nil
}

// StopPod cancels every running container of the pod and waits for them
// to end, at most grace seconds (StopContainer, then StopPodSandbox).
// The interpreter stops as soon as its context is cancelled, so the grace
// period is only a bound here; a real runtime sends SIGTERM and, once it
// expires, SIGKILL.
func (r *Runtime) StopPod(ctx context.Context, uid types.UID, grace int64) error {
	r.mu.Lock()
	p, ok := r.pods[uid]
	if !ok {
		r.mu.Unlock()
		return nil // never started here: nothing to stop
	}
	var waits []chan struct{}
	for _, t := range p.containers {
		if t.state == kubecontainer.ContainerStateRunning {
			t.cancel()
			waits = append(waits, t.done)
		}
	}
	r.mu.Unlock()
	limit := time.After(time.Duration(max(grace, 1)) * time.Second)
	for _, done := range waits {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		case <-limit:
			return fmt.Errorf("a container of pod %s did not stop within %ds", uid, grace)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.ready {
		p.ready = false
		r.publishLocked(uid)
	}
	return nil
}

// Remove forgets a stopped pod (RemoveContainer, RemovePodSandbox) and
// its cache entry.
func (r *Runtime) Remove(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pods[uid]
	if !ok || p.ready {
		return
	}
	delete(r.pods, uid)
	r.cache.Delete(uid)
}

// PodUIDs lists the pods this runtime has.
func (r *Runtime) PodUIDs() []types.UID {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []types.UID
	for uid := range r.pods {
		out = append(out, uid)
	}
	return out
}

// Status is the pod as a CRI runtime would describe it: a sandbox and
// its containers (GetPodStatus).
func (r *Runtime) Status(uid types.UID) *kubecontainer.PodStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.statusLocked(uid)
}

// Close stops every container and waits for their goroutines.
func (r *Runtime) Close() {
	r.mu.Lock()
	for _, p := range r.pods {
		for _, t := range p.containers {
			t.cancel()
		}
	}
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *Runtime) podLocked(pod *v1.Pod) *virtualPod {
	p, ok := r.pods[pod.UID]
	if !ok {
		p = &virtualPod{name: pod.Name, namespace: pod.Namespace, sandboxID: newID(), created: time.Now(), ready: true,
			containers: map[string]*task{}}
		r.pods[pod.UID] = p
	}
	return p
}

func (r *Runtime) statusLocked(uid types.UID) *kubecontainer.PodStatus {
	ps := &kubecontainer.PodStatus{ID: uid}
	p, ok := r.pods[uid]
	if !ok {
		return ps
	}
	ps.Name, ps.Namespace = p.name, p.namespace
	state := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	if p.ready {
		state = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	// No network namespace and no IP: the work runs in this process, on
	// the node's network. Network nil tells the kubelet's helpers there
	// is nothing to check (PodSandboxChanged).
	ps.SandboxStatuses = []*runtimeapi.PodSandboxStatus{{
		Id: p.sandboxID, State: state, CreatedAt: p.created.UnixNano(),
		Metadata: &runtimeapi.PodSandboxMetadata{Name: p.name, Namespace: p.namespace, Uid: string(uid)},
	}}
	for _, t := range p.containers {
		ps.ContainerStatuses = append(ps.ContainerStatuses, &kubecontainer.Status{
			ID: kubecontainer.ContainerID{Type: "virtual", ID: t.id}, Name: t.name, Image: t.image,
			State: t.state, CreatedAt: t.created, StartedAt: t.started, FinishedAt: t.finished,
			ExitCode: t.exitCode, Reason: t.reason, Message: t.message,
		})
	}
	return ps
}

// publishLocked writes the pod's state into the cache, stamped now, and
// tells the sync loop: what the PLEG does after a relist found a change.
func (r *Runtime) publishLocked(uid types.UID) {
	r.cache.Set(uid, r.statusLocked(uid), nil, time.Now())
	select {
	case r.events <- uid:
	default: // full: the next resync or housekeeping catches up
	}
}

func newID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
