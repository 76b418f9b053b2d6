package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"kubelet-labs/internal/critest"
	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labnode"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/cri"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// strayDials: some goroutine is net/http dialing for a request that ended.
func strayDials() bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "net/http.(*Transport).dialConnFor")
}

// testRuntime is one runtime the lab runs on: the course's containerd
// (each flavour under test) or the lab's own mock.
type testRuntime struct {
	name     string
	runtime  string // the --runtime flag
	endpoint string
	real     bool // HTTP and TCP probes need real processes and a pod network
	critest  critest.Runtime
}

// runtimes are the runtimes to test: containerd (skipped, or failed in
// CI, when it is missing) and the mock, which the lab starts itself.
type runtimeCase struct {
	name  string
	setup func(t *testing.T) testRuntime
}

func runtimes() []runtimeCase {
	var out []runtimeCase
	for _, c := range critest.Cases() {
		if c.Name == "fakecri" {
			continue
		}
		out = append(out, runtimeCase{c.Name, func(t *testing.T) testRuntime {
			rt := c.Setup(t)
			return testRuntime{name: rt.Name, runtime: "containerd", endpoint: rt.Endpoint, real: true, critest: rt}
		}})
	}
	return append(out, runtimeCase{"mock", func(*testing.T) testRuntime { return testRuntime{name: "mock", runtime: "mock"} }})
}

type running struct {
	lab *labnode.Node
	out *testenv.Lines
	rt  testRuntime
}

// startLab runs the lab in-process as node name, with a fast back-off.
func startLab(t *testing.T, rt testRuntime, name string, backOffMax time.Duration) *running {
	t.Helper()
	cp := testenv.ControlPlane(t)
	// A short folder: the mock's socket lives in it (108 bytes at most).
	dir, err := os.MkdirTemp("", "lab17-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Setenv(state.EnvVar, dir)
	o := labnode.Defaults("17-sync-pod", name)
	o.Kubeconfig, o.Timeout = cp.AdminKubeconfig(), time.Minute
	o.Runtime = labruntime.Flags{Kind: rt.runtime, Endpoint: rt.endpoint, PodLogsDir: filepath.Join(dir, "pod-logs")}
	o.Kubelet.BackOffInitial, o.Kubelet.BackOffMax = time.Second, backOffMax
	l := testenv.StartLab(t, func(ctx context.Context, out io.Writer, onReady func(*labnode.Node)) error {
		return run(ctx, o, labenv.NewPrinter(out), onReady)
	})
	return &running{lab: l.L, out: l.Out, rt: rt}
}

// setup is what every test starts with: the runtime, a namespace of its
// own, the lab running as node prefix+runtime, and — on containerd — a
// cleanup that removes the namespace's pods from the runtime once the lab
// has stopped.
func setup(t *testing.T, rc runtimeCase, prefix string, backOffMax time.Duration) (*running, kubernetes.Interface, string) {
	t.Helper()
	rt := rc.setup(t)
	testenv.NoLeaks(t)
	// An HTTP probe cut short by its timeout leaves net/http dialing on
	// (it keeps the connection for a later request) until the connect
	// fails — a few seconds for a pod IP that is gone, but up to the
	// kernel's bound when no answer comes at all (tcp_syn_retries=6:
	// 127 s; make test at load 15 saw one outlive 30 s). Not a goroutine
	// of the lab, and it ends by itself: wait for it before the leak check.
	t.Cleanup(func() {
		deadline := time.Now().Add(135 * time.Second)
		for strayDials() && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
	})
	admin := testenv.AdminClient(t)
	ns := testenv.Namespace(t, admin, "lab17")
	if rt.real {
		critest.RemoveNamespaceAtEnd(t, critest.Dial(t, rt.critest), ns)
	}
	suffix := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, strings.Replace(rt.name, "containerd", "c", 1))
	return startLab(t, rt, prefix+suffix, backOffMax), admin, ns
}

// deleteAll deletes the namespace's pods and waits until the node has
// stopped them and the objects are gone: nothing of the test runs on.
func deleteAll(t *testing.T, r *running, c kubernetes.Interface, ns string) {
	t.Helper()
	if err := c.CoreV1().Pods(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Poll(t, "every pod gone", 2*time.Minute, func() (bool, error) {
		l, err := c.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, err
	})
	testenv.Poll(t, "no probe worker left", 30*time.Second, func() (bool, error) { return r.lab.Kubelet.Probes().Workers() == 0, nil })
}

// manifests reads the lab's pod files, bound to node in namespace ns: the
// pods a learner applies.
func manifests(t *testing.T, ns, node string, files ...string) map[string]*v1.Pod {
	t.Helper()
	pods := map[string]*v1.Pod{}
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		d := yaml.NewYAMLOrJSONDecoder(f, 4096)
		for {
			var p v1.Pod
			err := d.Decode(&p)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if p.Spec.NodeName != "lab-node-17" {
				t.Fatalf("%s: pod %s is bound to %q, want lab-node-17", file, p.Name, p.Spec.NodeName)
			}
			p.Namespace, p.Spec.NodeName = ns, node
			pods[p.Name] = &p
		}
		f.Close()
	}
	return pods
}

func create(t *testing.T, c kubernetes.Interface, p *v1.Pod) {
	t.Helper()
	if _, err := c.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// podIs polls the pod as kubectl sees it until cond holds, and returns it.
func podIs(t *testing.T, c kubernetes.Interface, ns, name, what string, timeout time.Duration, cond func(*v1.Pod, *v1.ContainerStatus) bool) *v1.Pod {
	t.Helper()
	var pod *v1.Pod
	testenv.Poll(t, name+": "+what, timeout, func() (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) != 1 {
			return false, nil
		}
		pod = p
		return cond(p, &p.Status.ContainerStatuses[0]), nil
	})
	return pod
}

func isRunning(_ *v1.Pod, cs *v1.ContainerStatus) bool { return cs.State.Running != nil }

func ready(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func started(cs *v1.ContainerStatus) bool { return cs.Started != nil && *cs.Started }

// execIn runs cmd in the pod's running container through CRI ExecSync, as
// `crictl exec` does: it changes what the exec probes find.
func execIn(t *testing.T, c *cri.Client, p *v1.Pod, cmd ...string) {
	t.Helper()
	id := kubecontainer.ParseContainerID(p.Status.ContainerStatuses[0].ContainerID).ID
	res, err := c.Exec(context.Background(), id, cmd, 10*time.Second)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec %v in %s: %v (exit %d, %s%s)", cmd, p.Name, err, res.ExitCode, res.Stdout, res.Stderr)
	}
}

// Probes as kubectl shows them, on each runtime: a liveness failure
// restarts the container (restartCount 1, the kill logged with its
// reason); readiness flips the Ready condition both ways without a
// restart; a startup probe keeps liveness and readiness from running until
// it succeeds; HTTP and TCP probes against the pod IP (containerd).
func TestProbes(t *testing.T) {
	for _, rc := range runtimes() {
		t.Run(rc.name, func(t *testing.T) {
			r, admin, ns := setup(t, rc, "lab-node-17p", 16*time.Second)
			rt, c, node := r.rt, r.lab.Runtime.CRI, r.lab.Joined.Node.Name
			files := []string{"liveness.yaml", "readiness.yaml", "startup.yaml"}
			if rt.real {
				files = append(files, "web.yaml")
			}
			pods := manifests(t, ns, node, files...)
			// An exec probe that outlives timeoutSeconds: the runtime ends
			// it, and that counts as a failure (never ready).
			slow := pods["readiness"].DeepCopy()
			slow.Name = "slowprobe"
			slow.Spec.Containers[0].ReadinessProbe.Exec.Command = []string{"sleep", "3"}
			slow.Spec.Containers[0].ReadinessProbe.TimeoutSeconds = 1
			pods[slow.Name] = slow
			// The startup pod is created when its part of the test begins,
			// with a longer failure budget than the lab's 20 s: what is
			// tested is that the startup probe gates the other two, and on
			// a loaded machine the parts before it can take 20 s (CI saw
			// the container killed for its startup probe before the touch).
			startup := pods["startup"]
			delete(pods, "startup")
			startup.Spec.Containers[0].StartupProbe.FailureThreshold = 120
			for _, p := range pods {
				create(t, admin, p)
			}

			// Liveness: alive until /tmp/sick exists, then killed and started again.
			p := podIs(t, admin, ns, "liveness", "Running and ready", time.Minute, func(p *v1.Pod, cs *v1.ContainerStatus) bool {
				return cs.State.Running != nil && ready(p)
			})
			sick := time.Now()
			execIn(t, c, p, "touch", "/tmp/sick")
			p = podIs(t, admin, ns, "liveness", "restartCount 1 and running", time.Minute, func(_ *v1.Pod, cs *v1.ContainerStatus) bool {
				return cs.RestartCount == 1 && cs.State.Running != nil
			})
			t.Logf("%s: touch /tmp/sick → restartCount 1 and running again: %s (3 failures 1 s apart, then the kill)", rt.name, time.Since(sick).Round(time.Millisecond))
			if lt := p.Status.ContainerStatuses[0].LastTerminationState.Terminated; lt == nil || lt.ExitCode != 143 {
				t.Errorf("liveness lastState %+v, want terminated with 143 (the trap's exit at SIGTERM)", p.Status.ContainerStatuses[0].LastTerminationState)
			}
			failedAt, ok1 := r.out.First(sick, "liveness", ns+"/liveness", "Success → Failure")
			killAt, ok2 := r.out.First(sick, "computePodActions "+ns+"/liveness", "kill app (Container app failed liveness probe, will be restarted); start app")
			startAt, ok3 := r.out.First(sick, "CreateContainer + StartContainer liveness/app", "restartCount 1")
			if !ok1 || !ok2 || !ok3 {
				t.Errorf("output lacks the liveness failure (%v), the sync's decision (%v) or the restart (%v)", ok1, ok2, ok3)
			} else {
				t.Logf("%s: liveness Failure → kill decided %s → new container started %s", rt.name,
					killAt.Sub(failedAt).Round(time.Millisecond), startAt.Sub(failedAt).Round(time.Millisecond))
			}

			// Readiness: Ready flips with /tmp/ready, nothing restarts.
			p = podIs(t, admin, ns, "readiness", "Running, not ready", time.Minute, isRunning)
			if ready(p) {
				t.Fatalf("readiness is Ready before /tmp/ready exists")
			}
			for _, step := range []struct {
				cmd  []string
				want bool
			}{{[]string{"touch", "/tmp/ready"}, true}, {[]string{"rm", "/tmp/ready"}, false}} {
				at := time.Now()
				execIn(t, c, p, step.cmd...)
				p = podIs(t, admin, ns, "readiness", "Ready "+map[bool]string{true: "True", false: "False"}[step.want], 30*time.Second,
					func(p *v1.Pod, _ *v1.ContainerStatus) bool { return ready(p) == step.want })
				t.Logf("%s: %v → Ready=%v seen by the apiserver: %s (probe period 1 s)", rt.name, step.cmd, step.want, time.Since(at).Round(time.Millisecond))
			}
			if n := p.Status.ContainerStatuses[0].RestartCount; n != 0 {
				t.Errorf("readiness restartCount %d, want 0: readiness never restarts", n)
			}

			// Startup gates the others: its readiness probe is `true`, yet the
			// pod stays not ready while the startup probe fails.
			create(t, admin, startup)
			p = podIs(t, admin, ns, "startup", "Running, not started", time.Minute, func(p *v1.Pod, cs *v1.ContainerStatus) bool {
				return cs.State.Running != nil && cs.Started != nil && !*cs.Started
			})
			time.Sleep(3 * time.Second) // three readiness periods
			p = podIs(t, admin, ns, "startup", "still running", time.Minute, isRunning)
			if cs := p.Status.ContainerStatuses[0]; started(&cs) || ready(p) {
				t.Fatalf("startup: started=%v ready=%v before the startup probe succeeded", started(&cs), ready(p))
			}
			if _, ok := r.out.First(time.Time{}, "readiness", ns+"/startup", "→ Success"); ok {
				t.Errorf("the readiness probe of %s/startup ran before the container started", ns)
			}
			at := time.Now()
			execIn(t, c, p, "touch", "/tmp/started")
			podIs(t, admin, ns, "startup", "started and ready", 30*time.Second, func(p *v1.Pod, cs *v1.ContainerStatus) bool {
				return started(cs) && ready(p)
			})
			t.Logf("%s: touch /tmp/started → started and ready: %s", rt.name, time.Since(at).Round(time.Millisecond))

			if rt.real {
				// HTTP readiness and TCP liveness against the pod IP.
				p = podIs(t, admin, ns, "web", "ready (HTTP GET /healthz)", time.Minute, func(p *v1.Pod, _ *v1.ContainerStatus) bool { return ready(p) })
				execIn(t, c, p, "rm", "/www/healthz")
				p = podIs(t, admin, ns, "web", "not ready (404)", 30*time.Second, func(p *v1.Pod, _ *v1.ContainerStatus) bool { return !ready(p) })
				// One restart more than now: on a loaded machine a 1 s TCP
				// probe can time out three times before this point, and the
				// kubelet rightly restarts the container then too.
				before := p.Status.ContainerStatuses[0].RestartCount
				execIn(t, c, p, "killall", "nc")
				podIs(t, admin, ns, "web", "restarted (TCP connect refused) and ready again", time.Minute, func(p *v1.Pod, cs *v1.ContainerStatus) bool {
					return cs.RestartCount == before+1 && cs.State.Running != nil && ready(p)
				})
				out := r.out.String()
				for _, want := range []string{"HTTP probe failed with statuscode: 404", "connect: connection refused", "Container app failed liveness probe"} {
					if !strings.Contains(out, want) {
						t.Errorf("output lacks %q", want)
					}
				}
			}

			// The slow probe timed out, each time, and was a failure.
			if _, ok := r.out.First(time.Time{}, "readiness", ns+"/slowprobe", "failure 1/1", "timed out after 1s"); !ok {
				t.Errorf("output lacks the readiness timeout of %s/slowprobe", ns)
			}
			if p := podIs(t, admin, ns, "slowprobe", "running", time.Minute, isRunning); ready(p) {
				t.Errorf("slowprobe is Ready though its probe times out")
			}

			// Delete: every probe worker ends with its pod.
			deleteAll(t, r, admin, ns)
		})
	}
}

// restart is one instance of a crash-looping container, as the runtime
// recorded it.
type restart struct {
	attempt           uint32
	started, finished time.Time
}

// The crash-loop back-off, measured from the runtime's own timestamps: each
// restart comes no earlier than the back-off after the last exit (0, 1 s,
// 2 s, 4 s, 8 s with these flags). The sequence is logged; only the lower
// bound is asserted.
func TestCrashLoopBackOff(t *testing.T) {
	for _, rc := range runtimes() {
		t.Run(rc.name, func(t *testing.T) {
			r, admin, ns := setup(t, rc, "lab-node-17b", 8*time.Second)
			rt, c, node := r.rt, r.lab.Runtime.CRI, r.lab.Joined.Node.Name
			pod := manifests(t, ns, node, "crashloop.yaml")["crashloop"]
			create(t, admin, pod)

			// Collect each instance as it appears: the garbage collector may
			// remove old dead ones later.
			seen := map[uint32]restart{}
			backOffSeen := false
			const restarts = 5
			testenv.Poll(t, "5 restarts", 2*time.Minute, func() (bool, error) {
				p, err := admin.CoreV1().Pods(ns).Get(context.Background(), "crashloop", metav1.GetOptions{})
				if err != nil {
					return false, nil
				}
				if cs := p.Status.ContainerStatuses; len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "CrashLoopBackOff" {
					backOffSeen = true
				}
				ctrs, err := c.Runtime.ListContainers(c.Context(context.Background()), &runtimeapi.ContainerFilter{
					LabelSelector: map[string]string{kubetypes.KubernetesPodUIDLabel: string(p.UID)}})
				if err != nil {
					return false, err
				}
				for _, ct := range ctrs {
					if ct.State != runtimeapi.ContainerState_CONTAINER_EXITED {
						continue
					}
					if _, ok := seen[ct.Metadata.Attempt]; ok {
						continue
					}
					st, err := c.ContainerStatus(context.Background(), ct.Id)
					if err != nil {
						continue
					}
					seen[ct.Metadata.Attempt] = restart{ct.Metadata.Attempt, time.Unix(0, st.StartedAt), time.Unix(0, st.FinishedAt)}
				}
				return len(seen) > restarts, nil
			})
			var rs []restart
			for _, x := range seen {
				rs = append(rs, x)
			}
			sort.Slice(rs, func(i, j int) bool { return rs[i].attempt < rs[j].attempt })
			backOff := []time.Duration{0, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}
			var gaps []string
			for i := 1; i < len(rs) && i <= len(backOff); i++ {
				if rs[i].attempt != rs[i-1].attempt+1 {
					t.Fatalf("instances %d and %d: an attempt is missing", rs[i-1].attempt, rs[i].attempt)
				}
				gap := rs[i].started.Sub(rs[i-1].finished)
				gaps = append(gaps, gap.Round(10*time.Millisecond).String())
				if gap < backOff[i-1] {
					t.Errorf("restart %d came %s after the last exit, before its back-off of %s", rs[i].attempt, gap, backOff[i-1])
				}
			}
			t.Logf("%s: exit → next start, restarts 1-%d (back-off 0, 1s, 2s, 4s, 8s; plus up to 50%% jitter of the retry and the 1 s relist): %s",
				rt.name, len(gaps), strings.Join(gaps, ", "))
			// Shown only between the retry's status and its start, which
			// with back-offs this short may be too quick for a 50 ms poll.
			t.Logf("%s: kubectl saw reason CrashLoopBackOff: %v", rt.name, backOffSeen)
			if !strings.Contains(r.out.String(), "back-off 8s restarting failed container=app") {
				t.Errorf("output lacks the 8s back-off")
			}
			deleteAll(t, r, admin, ns)
		})
	}
}

// Restart policies on containers that end by themselves, as kubectl shows
// them: Never + exit 3 → Failed, no restart; OnFailure + exit 0 →
// Succeeded, no restart; OnFailure + exit 1 → restarted.
func TestRestartPolicies(t *testing.T) {
	for _, rc := range runtimes() {
		t.Run(rc.name, func(t *testing.T) {
			r, admin, ns := setup(t, rc, "lab-node-17r", 16*time.Second)
			c, node := r.lab.Runtime.CRI, r.lab.Joined.Node.Name
			pods := manifests(t, ns, node, "policies.yaml")
			fails := pods["onfailure"].DeepCopy()
			fails.Name = "onfailure-exit1"
			fails.Spec.Containers[0].Command = []string{"sh", "-c", "exit 1"}
			pods[fails.Name] = fails
			for _, p := range pods {
				create(t, admin, p)
			}
			for name, want := range map[string]struct {
				phase v1.PodPhase
				exit  int32
			}{"never": {v1.PodFailed, 3}, "onfailure": {v1.PodSucceeded, 0}} {
				p := podIs(t, admin, ns, name, "phase "+string(want.phase), time.Minute, func(p *v1.Pod, _ *v1.ContainerStatus) bool { return p.Status.Phase == want.phase })
				cs := p.Status.ContainerStatuses[0]
				if cs.RestartCount != 0 || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != want.exit {
					t.Errorf("%s: restartCount %d state %+v, want 0 restarts and exit %d", name, cs.RestartCount, cs.State, want.exit)
				}
				if n := len(containersOf(t, c, p.UID)); n != 1 {
					t.Errorf("%s: %d containers in the runtime, want exactly 1 (never restarted)", name, n)
				}
			}
			podIs(t, admin, ns, "onfailure-exit1", "restarted after exit 1", time.Minute, func(p *v1.Pod, cs *v1.ContainerStatus) bool {
				return cs.RestartCount >= 1 && p.Status.Phase == v1.PodRunning
			})
			deleteAll(t, r, admin, ns)
		})
	}
}

// A changed spec hash restarts the container: the only container field of
// a pod that may change is its image, and the same busybox named by its ID
// is another string, so another hash.
func TestSpecHashChange(t *testing.T) {
	for _, rc := range runtimes() {
		t.Run(rc.name, func(t *testing.T) {
			r, admin, ns := setup(t, rc, "lab-node-17h", 16*time.Second)
			rt, c, node := r.rt, r.lab.Runtime.CRI, r.lab.Joined.Node.Name
			pod := manifests(t, ns, node, "liveness.yaml")["liveness"]
			create(t, admin, pod)
			p := podIs(t, admin, ns, "liveness", "running", time.Minute, isRunning)
			img, err := c.Images.ImageStatus(c.Context(context.Background()), &runtimeapi.ImageSpec{Image: pod.Spec.Containers[0].Image}, false)
			if err != nil || img.GetImage() == nil {
				t.Fatalf("ImageStatus %s: %v", pod.Spec.Containers[0].Image, err)
			}
			id := img.GetImage().GetId()
			p.Spec.Containers[0].Image = id // kubectl set image pod/liveness app=ID
			at := time.Now()
			if _, err := admin.CoreV1().Pods(ns).Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			podIs(t, admin, ns, "liveness", "restarted with the new image", time.Minute, func(_ *v1.Pod, cs *v1.ContainerStatus) bool {
				return cs.RestartCount == 1 && cs.State.Running != nil
			})
			t.Logf("%s: image → %s: restarted in %s", rt.name, id[:19], time.Since(at).Round(time.Millisecond))
			if _, ok := r.out.First(at, "computePodActions "+ns+"/liveness", "definition changed", "will be restarted"); !ok {
				t.Errorf("output lacks the definition-changed decision")
			}
			var running []*runtimeapi.Container
			for _, ct := range containersOf(t, c, p.UID) {
				if ct.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
					running = append(running, ct)
				}
			}
			// The kubelet wrote the new spec's hash on the new container.
			want := strconv.FormatUint(kubecontainer.HashContainer(&p.Spec.Containers[0]), 16)
			if len(running) != 1 || running[0].Annotations["io.kubernetes.container.hash"] != want {
				t.Errorf("want one running container with spec hash %s, got %v", want, running)
			}
			deleteAll(t, r, admin, ns)
		})
	}
}

func containersOf(t *testing.T, c *cri.Client, uid types.UID) []*runtimeapi.Container {
	t.Helper()
	resp, err := c.Runtime.ListContainers(c.Context(context.Background()), &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{kubetypes.KubernetesPodUIDLabel: string(uid)}})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// Bad input: a clear error, before anything joins.
func TestBadInput(t *testing.T) {
	t.Setenv(state.EnvVar, t.TempDir())
	base := labnode.Defaults("17-sync-pod", "lab-node-17x")
	base.Runtime.Kind = labruntime.Containerd
	for _, tc := range []struct {
		name string
		edit func(*labnode.Options)
		want string
	}{
		{"unknown runtime", func(o *labnode.Options) { o.Runtime.Kind = "docker" }, `--runtime "docker"`},
		{"no containerd", func(o *labnode.Options) { o.Runtime.Endpoint = "unix://" + t.TempDir() + "/none.sock" }, labruntime.UpHint},
		{"back-off max below initial", func(o *labnode.Options) { o.Kubelet.BackOffMax = time.Millisecond }, "--backoff-max"},
		{"bad node name", func(o *labnode.Options) { o.Name = "../x" }, "is not a valid Node name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.edit(&o)
			err := run(context.Background(), o, labenv.NewPrinter(io.Discard), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error naming %q, got %v", tc.want, err)
			}
		})
	}
}
