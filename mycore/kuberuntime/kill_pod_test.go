package kuberuntime

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

// The graders of the build-it stage kill-pod (kill_pod.go): KillPod stops
// every container at once, then the sandboxes, and reports each step. The
// runtime is stopRuntime: each stop returns when the test lets it, so
// order and concurrency are seen, not timed.

// guardTime is how long a stop the test holds back waits for the others
// before it gives up: only an answer that stops the containers one after
// another ever waits that long (a right one is released as soon as all
// have arrived), so it bounds a wrong answer's test, and decides nothing.
const guardTime = 5 * time.Second

// killPodOf is a pod with the given containers (and sidecars, init
// containers with restartPolicy Always), 30 s of grace, and the running
// pod the kubelet would pass for it: every container running, sandboxes
// sb-0, sb-1…
func killPodOf(containers, sidecars []string, sandboxes int) (*v1.Pod, kubecontainer.Pod) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"}, Spec: v1.PodSpec{TerminationGracePeriodSeconds: i64(30)}}
	running := kubecontainer.Pod{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	always := v1.ContainerRestartPolicyAlways
	for _, n := range sidecars {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: n, RestartPolicy: &always})
	}
	for _, n := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: n})
	}
	for _, n := range append(slices.Clone(sidecars), containers...) {
		running.Containers = append(running.Containers, &kubecontainer.Container{ID: kubecontainer.ContainerID{Type: "containerd", ID: n + "-id"}, Name: n, State: kubecontainer.ContainerStateRunning})
	}
	for i := range sandboxes {
		running.Sandboxes = append(running.Sandboxes, &kubecontainer.Container{ID: kubecontainer.ContainerID{Type: "containerd", ID: fmt.Sprintf("sb-%d", i)}})
	}
	return pod, running
}

// stopLog is what the runtime saw, in order: "begin app-id", "end
// app-id", "sandbox sb-0".
type stopLog struct {
	mu     sync.Mutex
	events []string
}

func (l *stopLog) add(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *stopLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

func (l *stopLog) count(prefix string) int {
	n := 0
	for _, e := range l.all() {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

// The containers stop concurrently: every StopContainer is called before
// any returns (kuberuntime_container.go:943-958).
func TestKillPodStopsContainersConcurrently(t *testing.T) {
	pod, running := killPodOf([]string{"one", "two", "three"}, nil, 1)
	n := len(running.Containers)
	var (
		mu      sync.Mutex
		arrived []string
		waited  []string              // the stops the guard released
		all     = make(chan struct{}) // closed when every stop has arrived
		guard   = make(chan struct{}) // closed if they never all arrive
	)
	// The guard only keeps a wrong answer from hanging the test: a right
	// one passes as soon as the stops arrive, whatever the machine's load.
	timer := time.AfterFunc(guardTime, func() { close(guard) })
	defer timer.Stop()
	rt := &stopRuntime{
		container: func(_ context.Context, id string, _ int64) error {
			mu.Lock()
			arrived = append(arrived, id)
			if len(arrived) == n {
				close(all)
			}
			mu.Unlock()
			select {
			case <-all:
				return nil
			case <-guard:
				mu.Lock()
				defer mu.Unlock()
				waited = append(waited, id)
				return fmt.Errorf("test runtime: still waiting for the other containers' stops (arrived: %v)", arrived)
			}
		},
		sandbox: func(context.Context, string) error { return nil },
	}
	result := managerOver(rt).KillPodWithSyncResult(context.Background(), pod, running, nil)
	mu.Lock()
	defer mu.Unlock()
	if len(waited) > 0 || len(arrived) < n {
		t.Fatalf("KillPod: StopContainer was called for %v, and the stop of %v was still waiting for the others after %s: the containers were stopped one after another (or not all), so three containers that ignore SIGTERM take three grace periods. Upstream starts one goroutine per container, then waits for all of them (sync.WaitGroup: kuberuntime_container.go:934-958, v1.36.3)", arrived, waited, guardTime)
	}
	if err := result.Error(); err != nil {
		t.Errorf("KillPod: %v, want no error", err)
	}
}

// Every container stop has returned before the first StopPodSandbox
// (kuberuntime_manager.go:1955-1969).
func TestKillPodStopsSandboxesLast(t *testing.T) {
	pod, running := killPodOf([]string{"one", "two", "three"}, nil, 2)
	n := len(running.Containers)
	log := &stopLog{}
	var once sync.Once
	all := make(chan struct{})
	guard := make(chan struct{})
	timer := time.AfterFunc(guardTime, func() { close(guard) })
	defer timer.Stop()
	rt := &stopRuntime{
		container: func(_ context.Context, id string, _ int64) error {
			log.add("begin " + id)
			if log.count("begin ") == n {
				once.Do(func() { close(all) })
			}
			select { // hold every stop until all have begun (or the guard)
			case <-all:
			case <-guard:
			}
			log.add("end " + id)
			return nil
		},
		sandbox: func(_ context.Context, id string) error {
			if ended := log.count("end "); ended != n {
				log.add(fmt.Sprintf("sandbox %s (while %d of %d container stops had returned)", id, ended, n))
			} else {
				log.add("sandbox " + id)
			}
			return nil
		},
	}
	managerOver(rt).KillPodWithSyncResult(context.Background(), pod, running, nil)
	events := log.all()
	sandboxes := 0
	for _, e := range events {
		if strings.HasPrefix(e, "sandbox ") {
			sandboxes++
			if strings.Contains(e, "while") {
				t.Errorf("KillPod: StopPodSandbox %s: the sandbox is stopped only once every container has stopped — upstream waits for all the container kills (wg.Wait, kuberuntime_container.go:958) before its loop of StopPodSandbox (kuberuntime_manager.go:1964-1969, v1.36.3); stopping the sandbox kills what still runs in it at once, without its grace period. The runtime saw: %v", strings.TrimPrefix(e, "sandbox "), events)
			}
		}
	}
	if sandboxes != len(running.Sandboxes) {
		t.Errorf("KillPod: %d StopPodSandbox calls, want %d, one per sandbox of the running pod (kuberuntime_manager.go:1964-1969, v1.36.3). The runtime saw: %v", sandboxes, len(running.Sandboxes), events)
	}
	if ended := log.count("end "); ended != n {
		t.Errorf("KillPod returned when %d of %d container stops had returned: it must wait for them all (kuberuntime_container.go:958, v1.36.3). The runtime saw: %v", ended, n, events)
	}
}

// What KillPod reports: one KillContainer result per container, one
// KillPodSandbox for the pod, failures where the runtime failed
// (kuberuntime_manager.go:1953-1972, kuberuntime_container.go:948-955).
func TestKillPodResults(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "runtime is busy")
	notFound := status.Error(codes.NotFound, "no such thing")
	type want struct {
		failedContainers []string // the KillContainer results that fail
		sandboxFails     bool
		sandboxCalls     []string
	}
	for _, tc := range []struct {
		name       string
		containers []string
		sandboxes  int
		container  map[string]error // by container ID
		sandbox    map[string]error // by sandbox ID
		want       want
		why        string
	}{
		{"all stop", []string{"one", "two"}, 1, nil, nil, want{sandboxCalls: []string{"sb-0"}},
			"one KillContainer result per container, target its name, then one KillPodSandbox result, target the pod's UID (kuberuntime_container.go:948; kuberuntime_manager.go:1961-1962)"},
		{"a container's stop fails", []string{"one", "two"}, 1, map[string]error{"two-id": unavailable}, nil, want{failedContainers: []string{"two"}, sandboxCalls: []string{"sb-0"}},
			"the failed kill fails its own result (ErrKillContainer, with the error's text) and nothing else: the other container and the sandbox are still stopped (kuberuntime_container.go:948-950; kuberuntime_manager.go:1964-1969)"},
		{"a container already gone", []string{"one"}, 1, map[string]error{"one-id": notFound}, nil, want{sandboxCalls: []string{"sb-0"}},
			"killContainer counts NotFound as stopped (kuberuntime_container.go:913)"},
		{"a sandbox already gone", []string{"one"}, 1, nil, map[string]error{"sb-0": notFound}, want{sandboxCalls: []string{"sb-0"}},
			"StopPodSandbox's NotFound is success: the sandbox is gone (crierror.IsNotFound, kuberuntime_manager.go:1965)"},
		{"a sandbox's stop fails", []string{"one"}, 2, nil, map[string]error{"sb-0": unavailable}, want{sandboxFails: true, sandboxCalls: []string{"sb-0", "sb-1"}},
			"a failed StopPodSandbox fails the KillPodSandbox result (ErrKillPodSandbox), and the loop goes on to the pod's other sandboxes (kuberuntime_manager.go:1964-1969)"},
		{"no container left", nil, 1, nil, nil, want{sandboxCalls: []string{"sb-0"}},
			"with every container already exited, the sandbox is still stopped (kuberuntime_manager.go:1964-1969)"},
		{"no sandbox left", []string{"one"}, 0, nil, nil, want{},
			"the KillPodSandbox result is there even with no sandbox to stop (kuberuntime_manager.go:1961-1962)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, running := killPodOf(tc.containers, nil, tc.sandboxes)
			var mu sync.Mutex
			var sandboxCalls []string
			rt := &stopRuntime{
				container: func(_ context.Context, id string, _ int64) error { return tc.container[id] },
				sandbox: func(_ context.Context, id string) error {
					mu.Lock()
					defer mu.Unlock()
					sandboxCalls = append(sandboxCalls, id)
					return tc.sandbox[id]
				},
			}
			result := managerOver(rt).KillPodWithSyncResult(context.Background(), pod, running, nil)
			var got []string
			kills := map[string]*kubecontainer.SyncResult{}
			var sandboxResults []*kubecontainer.SyncResult
			for _, r := range result.SyncResults {
				got = append(got, fmt.Sprintf("%s %v error=%v %q", r.Action, r.Target, r.Error, r.Message))
				switch r.Action {
				case kubecontainer.KillContainer:
					kills[fmt.Sprint(r.Target)] = r
				case kubecontainer.KillPodSandbox:
					sandboxResults = append(sandboxResults, r)
				}
			}
			say := func(format string, args ...any) {
				t.Errorf("%s: %s — %s (v1.36.3).\n  results: %v", tc.name, fmt.Sprintf(format, args...), tc.why, got)
			}
			if len(result.SyncResults) != len(tc.containers)+1 || len(kills) != len(tc.containers) || len(sandboxResults) != 1 {
				say("%d results (%d KillContainer for different containers, %d KillPodSandbox), want %d: one KillContainer per container, one KillPodSandbox", len(result.SyncResults), len(kills), len(sandboxResults), len(tc.containers)+1)
				return
			}
			for _, name := range tc.containers {
				r, ok := kills[name]
				switch {
				case !ok:
					say("no KillContainer result for container %q (the target is the container's name)", name)
				case slices.Contains(tc.want.failedContainers, name) && (r.Error != kubecontainer.ErrKillContainer || !strings.Contains(r.Message, "runtime is busy")):
					say("KillContainer %s: error %v %q, want %v with the runtime's error in the message", name, r.Error, r.Message, kubecontainer.ErrKillContainer)
				case !slices.Contains(tc.want.failedContainers, name) && r.Error != nil:
					say("KillContainer %s failed (%v %q), want success", name, r.Error, r.Message)
				}
			}
			sr := sandboxResults[0]
			switch {
			case sr.Target != running.ID:
				say("KillPodSandbox target %v, want the pod's UID %v", sr.Target, running.ID)
			case tc.want.sandboxFails && sr.Error != kubecontainer.ErrKillPodSandbox:
				say("KillPodSandbox error %v, want %v", sr.Error, kubecontainer.ErrKillPodSandbox)
			case !tc.want.sandboxFails && sr.Error != nil:
				say("KillPodSandbox failed (%v %q), want success", sr.Error, sr.Message)
			}
			mu.Lock()
			calls := slices.Clone(sandboxCalls)
			mu.Unlock()
			if !slices.Equal(calls, tc.want.sandboxCalls) {
				say("StopPodSandbox called for %v, want %v", calls, tc.want.sandboxCalls)
			}
			if wantErr := len(tc.want.failedContainers) > 0 || tc.want.sandboxFails; (result.Error() != nil) != wantErr {
				want := "none"
				if wantErr {
					want = "an error"
				}
				say("KillPod's error is %v, want %s", result.Error(), want)
			}
		})
	}
}

// A sidecar stops after the main containers (the termination ordering,
// kuberuntime_container.go:935-942; kuberuntime_termination_order.go).
func TestKillPodSidecarsLast(t *testing.T) {
	pod, running := killPodOf([]string{"app"}, []string{"proxy"}, 1)
	log := &stopLog{}
	sidecarArrived := make(chan struct{})
	rt := &stopRuntime{
		container: func(_ context.Context, id string, _ int64) error {
			log.add("begin " + id)
			switch id {
			case "proxy-id":
				close(sidecarArrived)
			case "app-id":
				// app takes a second to stop: long enough for a sidecar
				// stopped without an order to arrive meanwhile. A right
				// answer holds the sidecar back until app has stopped.
				select {
				case <-sidecarArrived:
				case <-time.After(time.Second):
				}
			}
			log.add("end " + id)
			return nil
		},
		sandbox: func(context.Context, string) error { return nil },
	}
	managerOver(rt).KillPodWithSyncResult(context.Background(), pod, running, nil)
	events := log.all()
	if i, j := slices.Index(events, "begin proxy-id"), slices.Index(events, "end app-id"); i < 0 || j < 0 || i < j {
		t.Errorf("KillPod of a pod with the sidecar proxy and the container app: the runtime saw %v; want proxy's stop to begin only after app's has ended. With sidecars (restartable init containers: hasSidecars), upstream builds a termination ordering for the running containers (newTerminationOrdering) and gives it to every killContainer, so a sidecar waits for the main containers (kuberuntime_container.go:935-942; kuberuntime_termination_order.go:43-95, v1.36.3)", events)
	}
}
