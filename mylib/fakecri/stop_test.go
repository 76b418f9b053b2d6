package fakecri

import (
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// stopAndTime stops a container with a timeout and returns the final
// status and how long StopContainer took.
func stopAndTime(t *testing.T, r *Runtime, id string, timeout int64) (*runtimeapi.ContainerStatus, time.Duration) {
	t.Helper()
	began := time.Now()
	if _, err := r.StopContainer(tctx(t), &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: timeout}); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	took := time.Since(began)
	st := ctrStatus(t, r, id)
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Fatalf("StopContainer returned but state is %s", st.State)
	}
	return st, took
}

func TestStopIgnoringSIGTERMWaitsForTimeoutThenKills(t *testing.T) {
	cases := map[string]func(*runtimeapi.PodSandboxConfig, *runtimeapi.ContainerConfig){
		"trap in command": func(_ *runtimeapi.PodSandboxConfig, c *runtimeapi.ContainerConfig) {
			c.Command = []string{"sh", "-c", "trap '' TERM; while true; do sleep 1; done"}
		},
		"trap SIGTERM by number": func(_ *runtimeapi.PodSandboxConfig, c *runtimeapi.ContainerConfig) {
			c.Command = []string{"/bin/sh", "-c", `trap "" 15; sleep infinity`}
		},
		"container annotation": func(_ *runtimeapi.PodSandboxConfig, c *runtimeapi.ContainerConfig) {
			c.Command = []string{"sleep", "3600"}
			c.Annotations = map[string]string{AnnotationIgnoreSIGTERM: "true"}
		},
		"pod annotation naming the container": func(p *runtimeapi.PodSandboxConfig, c *runtimeapi.ContainerConfig) {
			p.Annotations[AnnotationIgnoreSIGTERM] = "sidecar, stubborn"
		},
		"pod annotation for all": func(p *runtimeapi.PodSandboxConfig, c *runtimeapi.ContainerConfig) {
			p.Annotations[AnnotationIgnoreSIGTERM] = "*"
		},
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := newRuntime(t)
			pod := podConfig("p")
			cfg := ctrConfig("stubborn")
			mutate(pod, cfg)
			id := createStart(t, r, runPod(t, r, pod), cfg)
			st, took := stopAndTime(t, r, id, 1)
			if st.ExitCode != 137 {
				t.Fatalf("exit code %d, want 137 (SIGKILL after the timeout)", st.ExitCode)
			}
			// It must have waited the grace period; no upper bound: a slow
			// machine may take longer, never less.
			if took < time.Second {
				t.Fatalf("StopContainer returned after %s, before the 1s timeout", took)
			}
			if ctrStatus(t, r, id).FinishedAt-ctrStatus(t, r, id).StartedAt < int64(time.Second) {
				t.Fatalf("finished_at - started_at shorter than the timeout")
			}
		})
	}
}

func TestPodAnnotationForOtherContainerDoesNotApply(t *testing.T) {
	r := newRuntime(t)
	pod := podConfig("p")
	pod.Annotations[AnnotationIgnoreSIGTERM] = "other"
	id := createStart(t, r, runPod(t, r, pod), ctrConfig("me", "sleep", "3600"))
	st, took := stopAndTime(t, r, id, 30)
	if st.ExitCode != 143 {
		t.Fatalf("exit %d, want 143", st.ExitCode)
	}
	if took > 10*time.Second {
		t.Fatalf("a SIGTERM-obeying container took %s to stop", took)
	}
}

func TestStopObeyingSIGTERMExits143AtOnce(t *testing.T) {
	r := newRuntime(t)
	sb := runPod(t, r, podConfig("p"))
	for _, cmd := range [][]string{
		nil,               // image default: a daemon
		{"sleep", "3600"}, // a plain sleep
		{"sh", "-c", "while true; do sleep 1; done"},
	} {
		id := createStart(t, r, sb, ctrConfig("c"+string(rune('a'+len(cmd))), cmd...))
		// A 30 s grace period: returning well before it proves SIGTERM
		// ended the container (no tight upper bound, to stay unflaky).
		st, took := stopAndTime(t, r, id, 30)
		if st.ExitCode != 143 || st.Reason != "Error" {
			t.Fatalf("%v: exit %d reason %q, want 143 Error", cmd, st.ExitCode, st.Reason)
		}
		if took > 15*time.Second {
			t.Fatalf("%v: took %s", cmd, took)
		}
	}
}

func TestStopWithZeroTimeoutKillsAtOnce(t *testing.T) {
	r := newRuntime(t)
	sb := runPod(t, r, podConfig("p"))
	id := createStart(t, r, sb, ctrConfig("c", "sh", "-c", "trap 'echo graceful; exit 0' TERM; sleep 3600"))
	st, _ := stopAndTime(t, r, id, 0)
	if st.ExitCode != 137 {
		t.Fatalf("exit %d, want 137: timeout 0 means SIGKILL", st.ExitCode)
	}
}

func TestTrapHandlerRunsOnSIGTERM(t *testing.T) {
	r := newRuntime(t)
	cfg, dir := logDirPod(t, "trap")
	c := ctrConfig("c", "sh", "-c", "trap 'echo cleaning up; exit 0' TERM; echo ready; while true; do sleep 1; done")
	c.LogPath = "c.log"
	id := createStart(t, r, runPod(t, r, cfg), c)
	st, _ := stopAndTime(t, r, id, 30)
	if st.ExitCode != 0 || st.Reason != "Completed" {
		t.Fatalf("exit %d %q, want 0 Completed (graceful shutdown)", st.ExitCode, st.Reason)
	}
	log := readFile(t, dir+"/c.log")
	if !strings.Contains(log, "stdout F ready\n") || !strings.Contains(log, "stdout F cleaning up\n") {
		t.Fatalf("log lacks the handler's output:\n%s", log)
	}
}

func TestCustomStopSignal(t *testing.T) {
	r := newRuntime(t)
	sb := runPod(t, r, podConfig("p"))
	c := ctrConfig("quit", "sh", "-c", "trap '' TERM; sleep 3600") // ignores TERM, not QUIT
	c.StopSignal = runtimeapi.Signal_SIGQUIT
	id := createStart(t, r, sb, c)
	if got := ctrStatus(t, r, id).StopSignal; got != runtimeapi.Signal_SIGQUIT {
		t.Fatalf("status stop signal %s", got)
	}
	st, took := stopAndTime(t, r, id, 30)
	if st.ExitCode != 131 || took > 15*time.Second {
		t.Fatalf("exit %d after %s, want 131 (128+SIGQUIT) at once", st.ExitCode, took)
	}
}

func TestConcurrentStopsAgree(t *testing.T) {
	r := newRuntime(t)
	sb := runPod(t, r, podConfig("p"))
	id := createStart(t, r, sb, ctrConfig("c", "sh", "-c", "trap '' TERM; sleep 3600"))
	errs := make(chan error, 5)
	for range 5 {
		go func() {
			_, err := r.StopContainer(tctx(t), &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 1})
			errs <- err
		}()
	}
	for range 5 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if st := ctrStatus(t, r, id); st.ExitCode != 137 {
		t.Fatalf("exit %d", st.ExitCode)
	}
}
