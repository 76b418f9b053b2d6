package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"

	"kubelet-labs/internal/critest"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/cri"
)

// prediction is what you expect of busybox.yaml with restartPolicy
// OnFailure and a script that ends with an exit code, once it settled.
type prediction struct {
	// Phase is the pod's phase: "Pending", "Running", "Succeeded" or "Failed".
	Phase string
	// Restarted: does kubectl get pod show RESTARTS above 0? "yes" or "no".
	Restarted string
	// SandboxReady: does crictl pods show its sandbox Ready ("yes") or
	// NotReady ("no")?
	SandboxReady string
	// Terminal: does the kubelet's SyncPod find the pod's phase terminal
	// and hand it to SyncTerminatingPod (the lab prints "phase … →
	// terminal")? "yes" or "no" — no: every sync goes on to the runtime
	// manager's SyncPod in mycore/kuberuntime/sync.go, which decides what
	// to start.
	Terminal string
}

// answer is your prediction (README, Exercise). Fill in every field, then
// run: make check LAB=12 EXERCISE=1
var answer = struct {
	Exit3 prediction // echo the greeting, then exit 3
	Exit0 prediction // echo the greeting, then exit 0
}{}

// TestExercise runs busybox.yaml with restartPolicy OnFailure twice on the
// course's containerd — once ending with exit 3, once with exit 0 — and
// compares what the API, containerd and the lab show with your answer.
// The lab's back-off here is 1 s doubling to 4 s (the kubelet's: 10 s to
// 5 min), so "settled" comes within seconds: the exit-3 pod after its
// second restart, the exit-0 pod once its phase is terminal and its
// sandbox stopped (or 30 s).
func TestExercise(t *testing.T) {
	testenv.Exercise(t)
	// Predict first: what the pods do is printed only to compare with a
	// prediction, never in place of one.
	if blank := unanswered(); len(blank) > 0 {
		t.Fatalf("you have not predicted yet: write %s in answer at the top of labs/12-pleg-containerd/exercise_test.go (README, Exercise)", strings.Join(blank, ", "))
	}
	rt := critest.Containerd(t)
	const node = "lab-node-12x"
	c := critest.Dial(t, rt)
	admin := testenv.AdminClient(t)
	ns := testenv.Namespace(t, admin, "lab12x")
	critest.RemoveNamespaceAtEnd(t, c, ns)
	r := startLab(t, rt, node, t.TempDir())

	scripts := map[string]string{"exit3": "exit 3", "exit0": "exit 0"}
	for name, exit := range scripts {
		pod := onFailurePod(t, name, ns, node, rt.BusyboxImage, exit)
		if _, err := admin.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	var mu sync.Mutex
	seen := map[string]prediction{}
	var wg sync.WaitGroup
	for name := range scripts {
		wg.Go(func() {
			got := settle(t, name, ns, c, admin)
			mu.Lock()
			seen[name] = got
			mu.Unlock()
		})
	}
	wg.Wait()
	out := r.Out.String()
	for name, p := range seen {
		p.Terminal = yesNo(saidTerminal(out, ns+"/"+name))
		seen[name] = p
	}

	for _, tc := range []struct {
		name string
		want prediction
	}{{"exit3", answer.Exit3}, {"exit0", answer.Exit0}} {
		got := seen[tc.name]
		t.Logf("%s (restartPolicy OnFailure, %s): phase %s, restarted %s, sandbox ready %s, terminal %s", tc.name, scripts[tc.name], got.Phase, got.Restarted, got.SandboxReady, got.Terminal)
		for _, w := range compare(tc.want, got) {
			t.Errorf("%s: %s", tc.name, w)
		}
	}
}

// onFailurePod is busybox.yaml as the exercise edits it: restartPolicy
// OnFailure, and the script ends with exit after the greeting.
func onFailurePod(t *testing.T, name, ns, node, image, exit string) *v1.Pod {
	t.Helper()
	f, err := os.Open("busybox.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var pod v1.Pod
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&pod); err != nil {
		t.Fatalf("busybox.yaml: %v", err)
	}
	pod.Name, pod.Namespace, pod.Spec.NodeName = name, ns, node
	pod.Spec.RestartPolicy = v1.RestartPolicyOnFailure
	app := &pod.Spec.Containers[0]
	app.Image = image
	greeting := strings.SplitAfter(app.Args[0], "\n")[1] // the echo line
	app.Args = []string{greeting + exit + "\n"}
	return &pod
}

// settle waits until the pod has settled — restarted twice, or terminal
// with no ready sandbox, or 30 s passed — and returns what it shows.
func settle(t *testing.T, name, ns string, c *cri.Client, admin kubernetes.Interface) prediction {
	got := prediction{Restarted: "no", SandboxReady: "no"}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
		p, err := admin.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) != 1 {
			continue
		}
		got.Phase = string(p.Status.Phase)
		got.Restarted = yesNo(p.Status.ContainerStatuses[0].RestartCount > 0)
		sbs, err := c.Pods(context.Background(), map[string]string{kubetypes.KubernetesPodUIDLabel: string(p.UID)})
		if err != nil {
			t.Error(err)
			return got
		}
		sandboxReady := false
		for _, sb := range sbs {
			if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				sandboxReady = true
			}
		}
		got.SandboxReady = yesNo(sandboxReady)
		terminal := p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
		if p.Status.ContainerStatuses[0].RestartCount >= 2 || terminal && !sandboxReady {
			return got
		}
	}
	return got
}

func compare(want, got prediction) []string {
	var wrong []string
	if want.Phase != got.Phase {
		wrong = append(wrong, fmt.Sprintf("you predicted phase %q; the API shows %q", want.Phase, got.Phase))
	}
	if want.Restarted != got.Restarted {
		wrong = append(wrong, fmt.Sprintf("you predicted Restarted %q; RESTARTS above 0: %s", want.Restarted, got.Restarted))
	}
	if want.SandboxReady != got.SandboxReady {
		wrong = append(wrong, fmt.Sprintf("you predicted SandboxReady %q; containerd shows the sandbox ready: %s", want.SandboxReady, got.SandboxReady))
	}
	if want.Terminal != got.Terminal {
		wrong = append(wrong, fmt.Sprintf("you predicted Terminal %q; the lab printed \"phase … → terminal\" for it: %s", want.Terminal, got.Terminal))
	}
	return wrong
}

// unanswered lists the fields of answer not filled in yet, with what each
// takes.
func unanswered() []string {
	var blank []string
	for _, p := range []struct {
		name string
		p    prediction
	}{{"Exit3", answer.Exit3}, {"Exit0", answer.Exit0}} {
		switch p.p.Phase {
		case "Pending", "Running", "Succeeded", "Failed":
		default:
			blank = append(blank, p.name+`.Phase ("Pending", "Running", "Succeeded" or "Failed")`)
		}
		for _, f := range []struct{ field, value string }{{"Restarted", p.p.Restarted}, {"SandboxReady", p.p.SandboxReady}, {"Terminal", p.p.Terminal}} {
			if f.value != "yes" && f.value != "no" {
				blank = append(blank, p.name+"."+f.field+` ("yes" or "no")`)
			}
		}
	}
	return blank
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// saidTerminal: the kubelet's SyncPod printed "<pod>: phase … → terminal".
func saidTerminal(out, pod string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, pod+": phase ") && strings.HasSuffix(strings.TrimSpace(l), "→ terminal") {
			return true
		}
	}
	return false
}
