package main

import (
	"bytes"
	"context"
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kubelet-labs/internal/critest"
	"kubelet-labs/internal/labenv"
	"kubelet-labs/mycore/cri"
)

func runLab(t *testing.T, o options) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, o, labenv.NewPrinter(&out))
	t.Logf("go run ./labs/11-containerd %+v -> %v\n%s", o, err, out.String())
	return out.String(), err
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
			o := options{endpoint: rt.Endpoint, timeout: 10 * time.Second}
			t.Run("show", func(t *testing.T) {
				out, err := runLab(t, o)
				if err != nil {
					t.Fatal(err)
				}
				mustContain(t, out, "runtime:     ", "CRI API:     v1", "RuntimeReady=true", "NetworkReady=true", "pods (", "containers (")
			})
			t.Run("demo", func(t *testing.T) {
				c := critest.Dial(t, rt)
				before := demoPods(t, c)
				o := o
				o.demo, o.image, o.podLogsDir = true, rt.BusyboxImage, t.TempDir()
				out, err := runLab(t, o)
				if err != nil {
					t.Fatal(err)
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
	_, err := runLab(t, options{endpoint: "unix://" + sock, timeout: time.Second})
	if err == nil {
		t.Fatal("no error without a runtime")
	}
	mustContain(t, err.Error(), "containerd is not reachable at "+sock, "sudo scripts/containerd-up.sh")
}

// The flags as a learner types them: --cri-endpoint like labs 12-18, and
// a bad value or an unknown flag is a usage error (exit 2), in one line.
func TestFlags(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "containerd.sock")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--cri-endpoint", "unix://" + sock}, 1, "error: containerd is not reachable at " + sock},
		{[]string{"--endpoint", "unix://" + sock}, 2, "flag provided but not defined: -endpoint"},
		{[]string{"--timeout", "0s"}, 2, "error: --timeout must be positive"},
	} {
		var o options
		var stdout, stderr bytes.Buffer
		code := labenv.Exec(labenv.Lab{
			Name:  "11-containerd",
			Flags: func(fs *flag.FlagSet) { flags(fs, &o) },
			Check: func() error { return check(o) },
			Run:   func(ctx context.Context, out *labenv.Printer) error { return run(ctx, o, out) },
		}, tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}
