package kuberuntime_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"kubelet-labs/internal/critest"
	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/kuberuntime"
	"kubelet-labs/mycore/plegruntime"
)

// The two kinds of container the stop lessons need. Both print "ready"
// once their trap is set, so a test never signals a shell that has not
// installed it yet. polite handles SIGTERM by exiting 143 (128+15, what a
// process killed by SIGTERM reports); stubborn ignores it, so only the
// runtime's SIGKILL after the grace period ends it: 137 (128+9). The mock
// interprets the same commands (mylib/fakecri/mocksh).
const (
	politeScript   = `trap 'exit 143' TERM; echo ready; while true; do sleep 0.2; done`
	stubbornScript = `trap '' TERM; echo ready; while true; do sleep 1; done`
)

// killEnv is one runtime with our runtime manager on it.
type killEnv struct {
	rt     critest.Runtime
	cri    *cri.Client
	m      *kuberuntime.Manager
	logDir string
	mu     sync.Mutex
	lines  []string // what the manager logged
}

func newKillEnv(t testing.TB, rc critest.Case) *killEnv {
	t.Helper()
	e := &killEnv{rt: rc.Setup(t), logDir: t.TempDir()}
	e.cri = critest.Dial(t, e.rt)
	e.m = kuberuntime.New(e.cri, kuberuntime.Options{PodLogsDir: e.logDir, Log: func(f string, a ...any) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.lines = append(e.lines, strings.TrimSpace(fmt.Sprintf(f, a...)))
	}})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("manager log:\n  %s", strings.Join(e.log(), "\n  "))
		}
	})
	return e
}

func (e *killEnv) log() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.lines...)
}

func ctr(name, script string) v1.Container {
	return v1.Container{Name: name, Image: "set-by-killPod", Command: []string{"sh", "-c", script}}
}

// killPod is a pod for these tests: a unique name and UID (the course's
// containerd is shared), the given grace period and containers.
func killPod(name string, grace int64, containers ...v1.Container) *v1.Pod {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	suffix := hex.EncodeToString(b)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-" + suffix, Namespace: "kill-test", UID: types.UID("kill-test-" + suffix)},
		Spec:       v1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: containers},
	}
}

// start runs pod's sandbox, then its sidecars and containers, the way our
// runtime manager starts them, and waits until each printed "ready". The
// pod is removed from the runtime when the test ends, whatever happened.
func (e *killEnv) start(t testing.TB, pod *v1.Pod) (sandboxID string, ids map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			list[i].Image = e.rt.BusyboxImage
		}
	}
	sandboxID, err := e.m.CreateSandbox(ctx, pod, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.removeAll(t, pod.UID) })
	cfg := sandboxConfig(t, e.m, pod)
	ids = map[string]string{}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			id, err := e.m.StartContainer(ctx, sandboxID, cfg, pod, &list[i], &kubecontainer.PodStatus{}, kuberuntime.PodIPs{})
			if err != nil {
				t.Fatal(err)
			}
			ids[list[i].Name] = id
		}
	}
	for name, id := range ids {
		e.waitLog(t, id, "ready", name)
	}
	return sandboxID, ids
}

func (e *killEnv) waitLog(t testing.TB, id, text, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		lines, err := e.cri.ContainerLog(context.Background(), id)
		if err == nil {
			for _, l := range lines {
				if strings.Contains(l.Text, text) {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s did not print %q in 30s (log: %v, err: %v)", name, text, lines, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// removeAll deletes every sandbox and container of the pod with grace 0:
// the cleanup a test needs whether or not its own kill and GC worked.
func (e *killEnv) removeAll(t testing.TB, uid types.UID) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sel := map[string]string{"io.kubernetes.pod.uid": string(uid)}
	pods, err := e.cri.Pods(ctx, sel)
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	for _, p := range pods {
		if err := e.cri.RemovePod(ctx, p.Id, 0); err != nil {
			t.Errorf("cleanup: remove pod %s: %v", p.Id, err)
		}
	}
}

// runningPod is what the kubelet's killPod passes: the pod status
// converted to what still runs (kubecontainer.ConvertPodStatusToRunningPod).
func (e *killEnv) runningPod(t testing.TB, uid types.UID) kubecontainer.Pod {
	t.Helper()
	ctx := context.Background()
	r := plegruntime.New(e.cri)
	p, err := r.GetPod(ctx, uid)
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.GetPodStatus(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	return kubecontainer.ConvertPodStatusToRunningPod(r.Type(), st)
}

func (e *killEnv) status(t testing.TB, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	st, err := e.cri.ContainerStatus(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// noLeaks checks, after everything else the test registered has been
// cleaned up, that no goroutine is left behind.
func noLeaks(t *testing.T) {
	opts := []goleak.Option{goleak.IgnoreCurrent()}
	t.Cleanup(func() { goleak.VerifyNone(t, opts...) })
}

// eachRuntime runs f against containerd and the mock, in parallel: the
// tests mostly wait for grace periods, not for the CPU.
func eachRuntime(t *testing.T, f func(t *testing.T, e *killEnv)) {
	noLeaks(t)
	for _, rc := range critest.Cases() {
		t.Run(rc.Name, func(t *testing.T) {
			t.Parallel()
			f(t, newKillEnv(t, rc))
		})
	}
}

// A container that exits on SIGTERM stops at once with 143; one that
// ignores it is SIGKILLed by the runtime when the grace period is over:
// 137, after about the grace period.
func TestKillContainerEscalation(t *testing.T) {
	eachRuntime(t, func(t *testing.T, e *killEnv) {
		const grace = 3
		pod := killPod("escalation", grace, ctr("polite", politeScript), ctr("stubborn", stubbornScript))
		_, ids := e.start(t, pod)
		ctx := context.Background()

		var wg sync.WaitGroup
		took := map[string]time.Duration{}
		var mu sync.Mutex
		for _, name := range []string{"polite", "stubborn"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				r := e.m.KillContainer(ctx, pod, kubecontainer.ContainerID{ID: ids[name]}, name, kuberuntime.ReasonUnknown, nil)
				mu.Lock()
				took[name] = time.Since(start)
				mu.Unlock()
				if r.Error != nil || r.Action != kubecontainer.KillContainer || r.Target != name {
					t.Errorf("%s: SyncResult %+v", name, r)
				}
			}()
		}
		wg.Wait()
		t.Logf("%s: grace %ds; polite stopped in %s, stubborn in %s", e.rt.Name, grace, took["polite"], took["stubborn"])

		if st := e.status(t, ids["polite"]); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 143 {
			t.Errorf("polite: %s exit %d, want EXITED 143 (it exited on SIGTERM)", st.State, st.ExitCode)
		}
		if st := e.status(t, ids["stubborn"]); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 137 {
			t.Errorf("stubborn: %s exit %d, want EXITED 137 (SIGKILL after the grace period)", st.State, st.ExitCode)
		}
		if d := took["polite"]; d >= grace*time.Second {
			t.Errorf("polite took %s: it should not have waited for the grace period", d)
		}
		if d := took["stubborn"]; d < grace*time.Second-500*time.Millisecond || d > (grace+5)*time.Second {
			t.Errorf("stubborn took %s, want about the %ds grace period", d, grace)
		}
	})
}

// A deletion's grace of 1 s is raised to the 2 s minimum.
func TestKillContainerMinimumGrace(t *testing.T) {
	eachRuntime(t, func(t *testing.T, e *killEnv) {
		pod := killPod("minimum", 30, ctr("stubborn", stubbornScript))
		_, ids := e.start(t, pod)
		one := int64(1)
		pod.DeletionGracePeriodSeconds = &one // kubectl delete --grace-period=1
		start := time.Now()
		r := e.m.KillContainer(context.Background(), pod, kubecontainer.ContainerID{ID: ids["stubborn"]}, "stubborn", kuberuntime.ReasonUnknown, nil)
		took := time.Since(start)
		t.Logf("%s: deletion grace 1s, stop took %s", e.rt.Name, took)
		if r.Error != nil {
			t.Fatal(r.Message)
		}
		if took < 1500*time.Millisecond || took > 7*time.Second {
			t.Errorf("stop took %s, want about the 2 s minimum", took)
		}
		if st := e.status(t, ids["stubborn"]); st.ExitCode != 137 {
			t.Errorf("exit %d, want 137", st.ExitCode)
		}
		if !containsLine(e.log(), "raised to the 2s minimum") {
			t.Errorf("the log does not say the grace was raised: %q", e.log())
		}
	})
}

// A preStop hook runs inside the grace period: with a 1 s hook and 3 s of
// grace the stop signal comes after the hook, SIGKILL 2 s later.
func TestKillContainerPreStop(t *testing.T) {
	eachRuntime(t, func(t *testing.T, e *killEnv) {
		c := ctr("stubborn", stubbornScript)
		c.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sleep", "1"}}}}
		pod := killPod("prestop", 3, c)
		_, ids := e.start(t, pod)
		start := time.Now()
		r := e.m.KillContainer(context.Background(), pod, kubecontainer.ContainerID{ID: ids["stubborn"]}, "stubborn", kuberuntime.ReasonUnknown, nil)
		took := time.Since(start)
		t.Logf("%s: grace 3s with a 1s preStop hook: stop took %s", e.rt.Name, took)
		if r.Error != nil {
			t.Fatal(r.Message)
		}
		if took < 2500*time.Millisecond || took > 8*time.Second {
			t.Errorf("hook + stop took %s, want about the 3 s grace period in all", took)
		}
		if !containsLine(e.log(), "timeout=2s (3s from spec.terminationGracePeriodSeconds, minus the preStop hook's 1s)") {
			t.Errorf("the log does not show the hook's time subtracted: %q", e.log())
		}
	})
}

// Killing a container that is gone is success, with or without its pod.
func TestKillContainerNotFound(t *testing.T) {
	eachRuntime(t, func(t *testing.T, e *killEnv) {
		pod := killPod("gone", 3, ctr("polite", politeScript))
		_, ids := e.start(t, pod)
		ctx := context.Background()
		if err := e.cri.Runtime.StopContainer(ctx, ids["polite"], 0); err != nil {
			t.Fatal(err)
		}
		if err := e.cri.Runtime.RemoveContainer(ctx, ids["polite"]); err != nil {
			t.Fatal(err)
		}
		for _, p := range []*v1.Pod{pod, nil} {
			if r := e.m.KillContainer(ctx, p, kubecontainer.ContainerID{ID: ids["polite"]}, "polite", kuberuntime.ReasonUnknown, nil); r.Error != nil {
				t.Errorf("pod %v: kill of a removed container failed: %s", p != nil, r.Message)
			}
		}
	})
}

// Without the pod (a kubelet that restarted), the grace period comes back
// from the annotations the kubelet wrote on the container.
func TestKillContainerWithoutPod(t *testing.T) {
	eachRuntime(t, func(t *testing.T, e *killEnv) {
		pod := killPod("nopod", 3, ctr("stubborn", stubbornScript))
		_, ids := e.start(t, pod)
		start := time.Now()
		r := e.m.KillContainer(context.Background(), nil, kubecontainer.ContainerID{ID: ids["stubborn"]}, "stubborn", kuberuntime.ReasonUnknown, nil)
		took := time.Since(start)
		t.Logf("%s: pod restored from annotations, stop took %s", e.rt.Name, took)
		if r.Error != nil {
			t.Fatal(r.Message)
		}
		if took < 2500*time.Millisecond || took > 8*time.Second {
			t.Errorf("stop took %s, want about the 3 s the annotation says", took)
		}
		if !containsLine(e.log(), "timeout=3s (3s from spec.terminationGracePeriodSeconds)") {
			t.Errorf("the log does not show the restored grace: %q", e.log())
		}
	})
}

// KillPod: three containers that all ignore SIGTERM, grace 3 s, stop in
// parallel — about 3 s, not 9 — each with its SyncResult; then the sandbox
// is stopped (NotReady) and nothing is removed.
func TestKillPod(t *testing.T) {
	eachRuntime(t, func(t *testing.T, e *killEnv) {
		const grace = 3
		pod := killPod("killpod", grace, ctr("one", stubbornScript), ctr("two", stubbornScript), ctr("three", stubbornScript))
		sandboxID, ids := e.start(t, pod)
		running := e.runningPod(t, pod.UID)
		if len(running.Containers) != 3 || len(running.Sandboxes) != 1 {
			t.Fatalf("running pod has %d containers and %d sandboxes, want 3 and 1", len(running.Containers), len(running.Sandboxes))
		}

		start := time.Now()
		result := e.m.KillPodWithSyncResult(context.Background(), pod, running, nil)
		took := time.Since(start)
		t.Logf("%s: KillPod of 3 containers ignoring SIGTERM, grace %ds: %s", e.rt.Name, grace, took)
		if err := result.Error(); err != nil {
			t.Fatal(err)
		}
		// One after another, three stops would take at least 3 × grace;
		// in parallel about one grace. The upper bound is the sequential
		// minimum, so a loaded machine's slow containerd does not fail it
		// (the timing goal itself is a benchmark: BenchmarkKillPod).
		if took < grace*time.Second-500*time.Millisecond || took >= 3*grace*time.Second {
			t.Errorf("KillPod took %s, want about one grace period (%ds), under the %ds three stops in a row need: the containers stop in parallel", took, grace, 3*grace)
		}
		kills := map[string]bool{}
		sandboxResults := 0
		for _, r := range result.SyncResults {
			t.Logf("  SyncResult %s %v: error=%v", r.Action, r.Target, r.Error)
			switch r.Action {
			case kubecontainer.KillContainer:
				kills[r.Target.(string)] = true
			case kubecontainer.KillPodSandbox:
				sandboxResults++
				if r.Target != pod.UID {
					t.Errorf("KillPodSandbox target %v, want the pod UID", r.Target)
				}
			}
		}
		if len(kills) != 3 || sandboxResults != 1 {
			t.Errorf("results: kills %v and %d sandbox results, want 3 and 1", kills, sandboxResults)
		}
		for name, id := range ids {
			if st := e.status(t, id); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 137 {
				t.Errorf("%s: %s exit %d, want EXITED 137", name, st.State, st.ExitCode)
			}
		}
		sb, err := e.cri.PodStatus(context.Background(), sandboxID)
		if err != nil {
			t.Fatal(err)
		}
		if sb.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
			t.Errorf("sandbox is %s after KillPod, want NOTREADY", sb.State)
		}
		// Killing it again is a no-op that succeeds (nothing runs, sandbox stopped).
		again := e.runningPod(t, pod.UID)
		if r := e.m.KillPodWithSyncResult(context.Background(), pod, again, nil); r.Error() != nil || len(again.Containers) != 0 {
			t.Errorf("second KillPod: %v, %d containers still running", r.Error(), len(again.Containers))
		}
	})
}

// With a sidecar (an init container with restartPolicy Always), the
// sidecar is stopped only once the main container has stopped: it waits
// for its turn (here about 1 s: main takes that long to shut down).
func TestKillPodSidecarLast(t *testing.T) {
	eachRuntime(t, func(t *testing.T, e *killEnv) {
		always := v1.ContainerRestartPolicyAlways
		sidecar := ctr("sidecar", politeScript)
		sidecar.RestartPolicy = &always
		pod := killPod("sidecar", 10, ctr("main", `trap 'sleep 1; exit 143' TERM; echo ready; while true; do sleep 0.2; done`))
		pod.Spec.InitContainers = []v1.Container{sidecar}
		_, ids := e.start(t, pod)
		start := time.Now()
		result := e.m.KillPodWithSyncResult(context.Background(), pod, e.runningPod(t, pod.UID), nil)
		took := time.Since(start)
		if err := result.Error(); err != nil {
			t.Fatal(err)
		}
		mainSt, sideSt := e.status(t, ids["main"]), e.status(t, ids["sidecar"])
		t.Logf("%s: KillPod %s; sidecar exited %s after main", e.rt.Name, took, time.Duration(sideSt.FinishedAt-mainSt.FinishedAt))
		if sideSt.FinishedAt < mainSt.FinishedAt {
			t.Errorf("the sidecar stopped before the main container (%d < %d)", sideSt.FinishedAt, mainSt.FinishedAt)
		}
		if mainSt.ExitCode != 143 || sideSt.ExitCode != 143 {
			t.Errorf("exit codes main %d sidecar %d, want 143 and 143 (both handle SIGTERM)", mainSt.ExitCode, sideSt.ExitCode)
		}
		if took > 8*time.Second {
			t.Errorf("KillPod took %s: the sidecar should go as soon as main has stopped, not wait the 10 s grace", took)
		}
	})
}

func containsLine(lines []string, part string) bool {
	for _, l := range lines {
		if strings.Contains(l, part) {
			return true
		}
	}
	return false
}
