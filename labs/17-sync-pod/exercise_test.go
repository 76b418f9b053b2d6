package main

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"kubelet-labs/internal/critest"
	"kubelet-labs/internal/testenv"
)

// answer is your prediction for liveness.yaml with restartPolicy: Never,
// after touch /tmp/sick (README, Exercise). Fill in every field, then
// run: make check LAB=17 EXERCISE=1
var answer = struct {
	// KillsPod: does the plan computePodActions prints after the third
	// failure kill the whole pod ("kill the pod …": the sandbox too)?
	// "yes" or "no".
	KillsPod string
	// StartsApp: does that plan start app again ("…; start app")? "yes"
	// or "no".
	StartsApp string
	// Ready, Status and Restarts are the columns of
	// `kubectl get pod liveness` once it settled, e.g. "1/1", "Running", 1
	// (Restarts -1: not predicted yet).
	Ready    string
	Status   string
	Restarts int
}{Restarts: -1}

// TestExercise runs liveness.yaml with restartPolicy Never on the course's
// containerd, makes its liveness probe fail, and compares the plan the
// lab prints and what kubectl shows with your answer.
func TestExercise(t *testing.T) {
	testenv.Exercise(t)
	// Predict first: the plan and what kubectl shows are printed only to
	// compare with a prediction, never in place of one.
	if blank := unanswered(); len(blank) > 0 {
		t.Fatalf("you have not predicted yet: write %s in answer at the top of labs/17-sync-pod/exercise_test.go (README, Exercise)", strings.Join(blank, ", "))
	}
	rc := runtimeCase{"containerd", func(t *testing.T) testRuntime {
		rt := critest.Containerd(t)
		return testRuntime{name: rt.Name, runtime: "containerd", endpoint: rt.Endpoint, real: true, critest: rt}
	}}
	r, admin, ns := setup(t, rc, "lab-node-17x", 16*time.Second)
	pod := manifests(t, ns, r.lab.Joined.Node.Name, "liveness.yaml")["liveness"]
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	create(t, admin, pod)

	p := podIs(t, admin, ns, "liveness", "Running and ready", time.Minute, func(p *v1.Pod, cs *v1.ContainerStatus) bool {
		return cs.State.Running != nil && ready(p)
	})
	execIn(t, r.lab.Runtime.CRI, p, "touch", "/tmp/sick")
	// Settled: over (a terminal phase), or running again after a restart.
	p = podIs(t, admin, ns, "liveness", "a terminal phase, or running again after a restart", time.Minute, func(p *v1.Pod, cs *v1.ContainerStatus) bool {
		return p.Status.Phase == v1.PodFailed || p.Status.Phase == v1.PodSucceeded || cs.RestartCount > 0 && cs.State.Running != nil
	})
	plan := planAfterLivenessFailure(r.out.String(), ns+"/liveness")
	stdout, stderr, code := testenv.Kubectl(t, "", "-n", ns, "get", "pod", "liveness", "--no-headers")
	cols := strings.Fields(stdout)
	if code != 0 || len(cols) < 4 {
		t.Fatalf("kubectl get pod liveness: exit %d: %s%s", code, stdout, stderr)
	}
	restarts, _ := strconv.Atoi(cols[3]) // "1 (3s ago)" is two fields: the count first
	t.Logf("computePodActions %s/liveness: %s", ns, plan)
	t.Logf("kubectl get pod liveness: %s (phase %s)", strings.TrimSpace(stdout), p.Status.Phase)

	var wrong []string
	if plan == "" {
		wrong = append(wrong, "the lab printed no computePodActions line about the failed liveness probe")
	}
	if got := yesNo(strings.Contains(plan, "kill the pod")); answer.KillsPod != got {
		wrong = append(wrong, fmt.Sprintf("you predicted KillsPod %q; the plan was %q", answer.KillsPod, plan))
	}
	if got := yesNo(strings.Contains(plan, "start app")); answer.StartsApp != got {
		wrong = append(wrong, fmt.Sprintf("you predicted StartsApp %q; the plan was %q", answer.StartsApp, plan))
	}
	if answer.Ready != cols[1] || answer.Status != cols[2] || answer.Restarts != restarts {
		wrong = append(wrong, fmt.Sprintf("you predicted READY %q STATUS %q RESTARTS %d; kubectl shows READY %q STATUS %q RESTARTS %d",
			answer.Ready, answer.Status, answer.Restarts, cols[1], cols[2], restarts))
	}
	for _, w := range wrong {
		t.Error(w)
	}
}

// unanswered lists the fields of answer not filled in yet, with what each
// takes.
func unanswered() []string {
	var blank []string
	for _, f := range []struct{ name, value string }{{"KillsPod", answer.KillsPod}, {"StartsApp", answer.StartsApp}} {
		if f.value != "yes" && f.value != "no" {
			blank = append(blank, f.name+` ("yes" or "no")`)
		}
	}
	if strings.TrimSpace(answer.Ready) == "" {
		blank = append(blank, `Ready (kubectl's READY, e.g. "1/1")`)
	}
	if strings.TrimSpace(answer.Status) == "" {
		blank = append(blank, "Status (kubectl's STATUS)")
	}
	if answer.Restarts < 0 {
		blank = append(blank, "Restarts (kubectl's RESTARTS, 0 or more)")
	}
	return blank
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// planAfterLivenessFailure is the plan of the first computePodActions line
// for pod that names the failed liveness probe.
func planAfterLivenessFailure(out, pod string) string {
	prefix := "computePodActions " + pod + ": "
	for _, l := range strings.Split(out, "\n") {
		if _, plan, ok := strings.Cut(l, prefix); ok && strings.Contains(plan, "failed liveness probe") {
			return strings.TrimSpace(plan)
		}
	}
	return ""
}
