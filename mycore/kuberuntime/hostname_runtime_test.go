package kuberuntime_test

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A pod whose name is longer than a hostname may be starts, with its name
// cut to 63 characters as its hostname — before, runc's sethostname
// refused the 65-character name of upstream's e2e tests (EINVAL) and the
// pod never started.
func TestLongPodNameStartsWithACutHostnameOnRuntime(t *testing.T) {
	eachRuntime(t, func(t *testing.T, e *killEnv) {
		pod := killPod(strings.Repeat("h", 56), 1, ctr("c", "echo ready; sleep 600")) // 56 + "-" + 8 hex = 65
		if len(pod.Name) != 65 {
			t.Fatalf("pod name of %d characters, want 65", len(pod.Name))
		}
		_, ids := e.start(t, pod)
		if !e.rt.Real {
			return // the mock runs no process to ask; the config is TestSandboxHostnameIsWhatTheKernelTakes's
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := e.cri.Exec(ctx, ids["c"], []string{"hostname"}, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := strings.TrimSpace(string(res.Stdout)), pod.Name[:63]; got != want {
			t.Errorf("hostname in the container: %q, want the pod's name cut to 63: %q", got, want)
		}
	})
}
