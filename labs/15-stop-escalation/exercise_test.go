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
	"sigs.k8s.io/yaml"

	"kubelet-labs/internal/critest"
	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labpod"
	"kubelet-labs/internal/labpod/labpodtest"
	"kubelet-labs/internal/testenv"
)

// answer is your prediction (README, Exercise), for a copy of pod.yaml in
// which polite's command is ["sleep", "3600"] and stubborn has
// lifecycle.preStop.exec.command ["sleep", "1"] (-1: not predicted yet):
var answer = struct {
	// polite's exit code in part 1, on containerd and on the mock
	PoliteExitContainerd, PoliteExitMock int32
	// the timeout= of stubborn's StopContainer in the kubelet's log line,
	// in seconds: part 1 (the pod's 3 s) and part 2 (the delete's 1 s)
	StubbornTimeoutPart1, StubbornTimeoutPart2 int
}{
	PoliteExitContainerd: -1, PoliteExitMock: -1,
	StubbornTimeoutPart1: -1, StubbornTimeoutPart2: -1,
}

// TestExercise runs the lab with the exercise's pod on containerd and on
// the mock and compares what happened with your predictions.
func TestExercise(t *testing.T) {
	testenv.Exercise(t)
	// Predict first: what the lab does is printed only to compare with a
	// prediction, never in place of one.
	if blank := unanswered(); len(blank) > 0 {
		t.Fatalf("you have not predicted yet: write %s in answer at the top of labs/15-stop-escalation/exercise_test.go (README, Exercise)", strings.Join(blank, ", "))
	}
	podFile := exercisePod(t)
	timeouts := regexp.MustCompile(`CRI StopContainer stop-demo/stubborn \S+ timeout=(\d+)s[^\n]*`)
	// the course's default containerd (as the lab's --runtime containerd), then the
	// mock; without containerd its part skips (fails in CI)
	for _, rc := range []critest.Case{{Name: "containerd", Setup: critest.Containerd}, {Name: "fakecri", Setup: critest.FakeCRI}} {
		t.Run(rc.Name, func(t *testing.T) {
			o := options{Options: labpodtest.Options(t, rc, "lab-node-15"), deleteGrace: 1}
			o.PodFile = podFile
			var out testenv.SyncBuffer
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			rep, err := run(ctx, o, labenv.NewPrinter(&out))
			if err != nil {
				t.Fatalf("the lab failed: %v\n%s", err, out.String())
			}
			polite := find(t, rep.Parts[0], "polite")
			want := answer.PoliteExitMock
			if rc.Name != "fakecri" {
				want = answer.PoliteExitContainerd
			}
			if polite.ExitCode != want {
				t.Errorf("on %s, polite running sleep 3600: you predicted exit code %d; it exited %d after %.3fs", rc.Name, want, polite.ExitCode, polite.Took.Seconds())
			}
			if rc.Name != "fakecri" {
				return // the timeouts are the kubelet's: the same on both
			}
			m := timeouts.FindAllStringSubmatch(out.String(), -1)
			if len(m) != 2 {
				t.Fatalf("want two StopContainer lines for stubborn in the lab's output, found %d:\n%s", len(m), out.String())
			}
			for i, predicted := range []int{answer.StubbornTimeoutPart1, answer.StubbornTimeoutPart2} {
				if got, _ := strconv.Atoi(m[i][1]); got != predicted {
					t.Errorf("part %d: you predicted timeout=%ds for stubborn; the kubelet's line says %s", i+1, predicted, m[i][0])
				}
			}
		})
	}
}

// unanswered lists the fields of answer not filled in yet, with what each
// takes.
func unanswered() []string {
	var blank []string
	for _, f := range []struct {
		name  string
		value int
	}{{"PoliteExitContainerd", int(answer.PoliteExitContainerd)}, {"PoliteExitMock", int(answer.PoliteExitMock)}} {
		if f.value < 0 || f.value > 255 {
			blank = append(blank, f.name+" (an exit code, 0 to 255)")
		}
	}
	for _, f := range []struct {
		name  string
		value int
	}{{"StubbornTimeoutPart1", answer.StubbornTimeoutPart1}, {"StubbornTimeoutPart2", answer.StubbornTimeoutPart2}} {
		if f.value < 0 {
			blank = append(blank, f.name+" (whole seconds, 0 or more)")
		}
	}
	return blank
}

// exercisePod is the README's copy of pod.yaml: polite without its trap,
// stubborn with a one-second preStop hook.
func exercisePod(t *testing.T) string {
	t.Helper()
	pod, err := labpod.Load("", podYAML)
	if err != nil {
		t.Fatal(err)
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		switch c.Name {
		case "polite":
			c.Command = []string{"sleep", "3600"}
		case "stubborn":
			c.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sleep", "1"}}}}
		}
	}
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
