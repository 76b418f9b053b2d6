package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/internal/critest"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/cri"
)

// answer is your prediction for the demo container once its trap line is
// gone (README, Exercise). Fill in every field, then run:
// make check LAB=11 EXERCISE=1
var answer = struct {
	// PID1 is the command that is PID 1 inside the demo container, as
	// /proc/1/comm names it there: "pause", "sh", "sleep",
	// "containerd-shim-runc-v2", …
	PID1 string
	// ExitCode is what StopContainer leaves as the container's exit code
	// without the trap (-1: not predicted yet).
	ExitCode int
	// Reason is the reason containerd reports with it: "Completed",
	// "Error", "OOMKilled", …
	Reason string
	// WaitsWholeTimeout: does StopContainer take the whole timeout it was
	// given before the container is gone? "yes" or "no".
	WaitsWholeTimeout string
}{ExitCode: -1}

// stopTimeout is the StopContainer timeout of this test: shorter than the
// demo's 5 s, the same behaviour.
const stopTimeout = 2 * time.Second

// stopResult is what one StopContainer did.
type stopResult struct {
	took     time.Duration
	exitCode int32
	reason   string
	err      error
}

// TestExercise runs the demo's script twice in one pod on the course's
// containerd — as it is, and without its trap line — stops both, and
// compares what happened with your answer.
func TestExercise(t *testing.T) {
	testenv.Exercise(t)
	// Predict first: what the container does is printed only to compare
	// with a prediction, never in place of one.
	if blank := unanswered(); len(blank) > 0 {
		t.Fatalf("you have not predicted yet: write %s in answer at the top of labs/11-containerd/exercise_test.go (README, Exercise)", strings.Join(blank, ", "))
	}
	rt := critest.Containerd(t)
	c := critest.Dial(t, rt)
	p := critest.Pod(t, "lab11-exercise")
	podID, podCfg := critest.RunPod(t, c, p)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	scripts := map[string]string{"trap": script, "notrap": withoutTrap(script)}
	ids := map[string]string{}
	for name, sh := range scripts {
		id, err := c.StartContainer(ctx, podID, podCfg, p.ContainerConfig(cri.Container{Name: name, Image: rt.BusyboxImage, Command: []string{"sh", "-c", sh}}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.WaitContainerState(ctx, id, runtimeapi.ContainerState_CONTAINER_RUNNING, 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		ids[name] = id
	}

	// Who is PID 1 in the container: ask it.
	res, err := c.Exec(ctx, ids["notrap"], []string{"cat", "/proc/1/comm"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	pid1 := strings.TrimSpace(string(res.Stdout))

	// Stop both at once, as a kubelet stops a pod's containers.
	var mu sync.Mutex
	results := map[string]stopResult{}
	var wg sync.WaitGroup
	for name, id := range ids {
		wg.Go(func() {
			r := stop(ctx, c, id)
			mu.Lock()
			results[name] = r
			mu.Unlock()
		})
	}
	wg.Wait()
	for name, r := range results {
		if r.err != nil {
			t.Fatalf("%s: %v", name, r.err)
		}
	}
	with, without := results["trap"], results["notrap"]
	t.Logf("PID 1 in the container: %s", pid1)
	t.Logf("with the trap:    StopContainer(timeout %s) took %s, exit code %d (%s)", stopTimeout, with.took.Round(10*time.Millisecond), with.exitCode, with.reason)
	t.Logf("without the trap: StopContainer(timeout %s) took %s, exit code %d (%s)", stopTimeout, without.took.Round(10*time.Millisecond), without.exitCode, without.reason)

	waited := "no"
	if without.took >= stopTimeout-100*time.Millisecond {
		waited = "yes"
	}
	var wrong []string
	if answer.PID1 != pid1 {
		wrong = append(wrong, fmt.Sprintf("you predicted PID 1 is %q; /proc/1/comm in the container says %q", answer.PID1, pid1))
	}
	if answer.ExitCode != int(without.exitCode) {
		wrong = append(wrong, fmt.Sprintf("you predicted exit code %d; without the trap the container exited %d", answer.ExitCode, without.exitCode))
	}
	if answer.Reason != without.reason {
		wrong = append(wrong, fmt.Sprintf("you predicted reason %q; containerd reported %q", answer.Reason, without.reason))
	}
	if answer.WaitsWholeTimeout != waited {
		wrong = append(wrong, fmt.Sprintf("you predicted WaitsWholeTimeout %q; StopContainer with timeout %s took %s (with the trap: %s)",
			answer.WaitsWholeTimeout, stopTimeout, without.took.Round(10*time.Millisecond), with.took.Round(10*time.Millisecond)))
	}
	for _, w := range wrong {
		t.Error(w)
	}
}

// unanswered lists the fields of answer not filled in yet, with what each
// takes.
func unanswered() []string {
	var blank []string
	if strings.TrimSpace(answer.PID1) == "" {
		blank = append(blank, "PID1 (a command's name)")
	}
	if answer.ExitCode < 0 || answer.ExitCode > 255 {
		blank = append(blank, "ExitCode (0 to 255)")
	}
	if strings.TrimSpace(answer.Reason) == "" {
		blank = append(blank, "Reason (containerd's word for it)")
	}
	if answer.WaitsWholeTimeout != "yes" && answer.WaitsWholeTimeout != "no" {
		blank = append(blank, `WaitsWholeTimeout ("yes" or "no")`)
	}
	return blank
}

// withoutTrap is the demo's script with its trap line deleted, as the
// exercise asks you to do in main.go.
func withoutTrap(s string) string {
	var keep []string
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "trap ") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}

// stop is the demo's StopContainer, timed until the container has exited.
func stop(ctx context.Context, c *cri.Client, id string) stopResult {
	t0 := time.Now()
	if err := c.StopContainer(ctx, id, stopTimeout); err != nil {
		return stopResult{err: err}
	}
	st, err := c.WaitContainerState(ctx, id, runtimeapi.ContainerState_CONTAINER_EXITED, 20*time.Millisecond)
	if err != nil {
		return stopResult{err: err}
	}
	return stopResult{took: time.Since(t0), exitCode: st.ExitCode, reason: st.Reason}
}
