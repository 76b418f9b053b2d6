package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"sigs.k8s.io/yaml"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labpod"
	"kubelet-labs/internal/labpod/labpodtest"
	"kubelet-labs/internal/testenv"
)

// answer is your prediction (README, Exercise), for a copy of pod.yaml
// with a fourth container "four" that exits on SIGTERM and a preStop hook
// ["sleep", "2"] on container two (-1 and "": not predicted yet):
var answer = struct {
	// how long KillPod takes, in whole seconds (rounded down)
	KillPodSeconds int
	// the SyncResult that comes back first: a container's name, or
	// "sandbox" for KillPodSandbox
	FirstResult string
	// the container whose SyncResult comes back last
	LastContainer string
	// the timeout= of two's StopContainer in the kubelet's log line, in seconds
	TwoTimeout int
}{
	KillPodSeconds: -1,
	FirstResult:    "",
	LastContainer:  "",
	TwoTimeout:     -1,
}

// TestExercise runs the lab with the exercise's pod on the mock CRI, where
// a stop takes the time the kubelet gives it and not a millisecond more,
// and compares what KillPod did with your predictions.
func TestExercise(t *testing.T) {
	testenv.Exercise(t)
	// Predict first: what KillPod does is printed only to compare with a
	// prediction, never in place of one.
	if blank := unanswered(); len(blank) > 0 {
		t.Fatalf("you have not predicted yet: write %s in answer at the top of labs/16-kill-pod/exercise_test.go (README, Exercise)", strings.Join(blank, ", "))
	}
	o := options{labpodtest.Mock(t, "lab-node-16")}
	o.PodFile = exercisePod(t)
	var out testenv.SyncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := run(ctx, o, labenv.NewPrinter(&out))
	if err != nil {
		t.Fatalf("the lab failed: %v\n%s", err, out.String())
	}

	if got := int(rep.KillTook / time.Second); got != answer.KillPodSeconds {
		t.Errorf("you predicted KillPod takes %ds; it took %.3fs", answer.KillPodSeconds, rep.KillTook.Seconds())
	}
	var order []string
	for _, r := range rep.Results {
		name := "sandbox"
		if r.Action == kubecontainer.KillContainer {
			name = r.Target.(string)
		}
		order = append(order, name)
	}
	if len(order) != 5 {
		t.Fatalf("SyncResults %q: want 4 containers and the sandbox", order)
	}
	if order[0] != answer.FirstResult {
		t.Errorf("you predicted %q comes back first; the SyncResults came back in the order %q", answer.FirstResult, order)
	}
	if last := order[len(order)-2]; last != answer.LastContainer {
		t.Errorf("you predicted container %q comes back last; the SyncResults came back in the order %q", answer.LastContainer, order)
	}
	m := regexp.MustCompile(`CRI StopContainer kill-demo/two \S+ timeout=(\d+)s[^\n]*`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no StopContainer line for two in the lab's output:\n%s", out.String())
	}
	if got, _ := strconv.Atoi(m[1]); got != answer.TwoTimeout {
		t.Errorf("you predicted timeout=%ds for two; the kubelet's line says %s", answer.TwoTimeout, m[0])
	}
}

// unanswered lists the fields of answer not filled in yet, with what each
// takes.
func unanswered() []string {
	var blank []string
	if answer.KillPodSeconds < 0 {
		blank = append(blank, "KillPodSeconds (whole seconds, 0 or more)")
	}
	if strings.TrimSpace(answer.FirstResult) == "" {
		blank = append(blank, `FirstResult (a container's name, or "sandbox")`)
	}
	if strings.TrimSpace(answer.LastContainer) == "" {
		blank = append(blank, "LastContainer (a container's name)")
	}
	if answer.TwoTimeout < 0 {
		blank = append(blank, "TwoTimeout (whole seconds, 0 or more)")
	}
	return blank
}

// exercisePod is the README's copy of pod.yaml: container four exits on
// SIGTERM, two has a two-second preStop hook.
func exercisePod(t *testing.T) string {
	t.Helper()
	pod, err := labpod.Load("", podYAML)
	if err != nil {
		t.Fatal(err)
	}
	for i := range pod.Spec.Containers {
		if c := &pod.Spec.Containers[i]; c.Name == "two" {
			c.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sleep", "2"}}}}
		}
	}
	pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: "four", Image: "busybox",
		Command: []string{"sh", "-c", "trap 'exit 0' TERM; echo ready; while true; do sleep 0.2; done"}})
	b, err := yaml.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "pod.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
