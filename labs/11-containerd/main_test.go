package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kubelet-labs/internal/critest"
	"kubelet-labs/mycore/cri"
)

func runLab(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, args, &out, &errb)
	t.Logf("go run ./labs/11-containerd %s -> exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
	return code, out.String(), errb.String()
}

func mustContain(t *testing.T, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("output lacks %q", p)
		}
	}
}

// The lab against every runtime of the shared table (real containerd, and
// the mock where it behaves the same).
func TestLab(t *testing.T) {
	for _, rc := range critest.Cases() {
		t.Run(rc.Name, func(t *testing.T) {
			rt := rc.Setup(t)
			t.Run("show", func(t *testing.T) {
				code, out, _ := runLab(t, "--endpoint", rt.Endpoint)
				if code != 0 {
					t.Fatalf("exit %d", code)
				}
				mustContain(t, out, "runtime:     ", "CRI API:     v1", "RuntimeReady=true", "NetworkReady=true", "pods (", "containers (")
			})
			t.Run("demo", func(t *testing.T) {
				c := critest.Dial(t, rt)
				before := demoPods(t, c)
				code, out, _ := runLab(t, "--endpoint", rt.Endpoint, "--run-demo", "--image", rt.BusyboxImage, "--pod-log-dir", t.TempDir())
				if code != 0 {
					t.Fatalf("exit %d", code)
				}
				mustContain(t, out, "RunPodSandbox", "Create+StartContainer",
					`-> stdout "hello from ExecSync\n", exit code 0`, "StopContainer", "pod gone")
				if rt.Real {
					// the trap ran: a graceful stop, and the log shows both lines
					mustContain(t, out, "exit code 0 (Completed)", "stdout  hello from lab11-demo", "stdout  got SIGTERM, bye")
				}
				if after := demoPods(t, c); after != before {
					t.Errorf("demo left a pod behind: %d lab11-demo pods before, %d after", before, after)
				}
			})
		})
	}
}

func demoPods(t *testing.T, c *cri.Client) int {
	pods, err := c.Pods(context.Background(), map[string]string{cri.LabelPodName: "lab11-demo"})
	if err != nil {
		t.Fatal(err)
	}
	return len(pods)
}

// Without a runtime the lab must fail clearly, not hang or panic.
func TestLabNoRuntime(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "containerd.sock")
	code, _, errOut := runLab(t, "--endpoint", "unix://"+sock)
	if code == 0 {
		t.Fatal("exit 0 without a runtime")
	}
	mustContain(t, errOut, "containerd is not reachable at "+sock, "sudo scripts/containerd-up.sh")
}
