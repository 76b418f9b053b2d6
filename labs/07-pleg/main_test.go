package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/labs/07-pleg/plegview"
	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/plegruntime"
	"kubelet-labs/mylib/fakecri"
)

// The PLEG is node-local: it talks to the container runtime only, so these
// tests need the mock CRI and no control plane.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// klog's flush daemon lives for the process.
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		// a gRPC dial leaves this resolver goroutine for a moment after Close
		goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
	)
}

func opts() options {
	return options{runtime: labruntime.Flags{Kind: labruntime.Mock}, relistPeriod: 200 * time.Millisecond, relistThreshold: 3 * time.Minute, steps: true, live: true}
}

// TestRelistStepByStep: the four relists print the diff and the events a
// learner reads in the README, and the health check trips after 3m.
func TestRelistStepByStep(t *testing.T) {
	t.Setenv("LABS_STATE_DIR", t.TempDir())
	o := opts()
	o.live = false
	out := &testenv.SyncBuffer{}
	if err := run(context.Background(), o, labenv.NewPrinter(out), nil); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	s := out.String()
	t.Log(s)
	parts := strings.Split(s, "\nrelist #")
	if len(parts) != 6 {
		t.Fatalf("%d relists printed, want 5", len(parts)-1)
	}
	want := []struct{ rows, events []string }{
		1: {events: []string{"events sent: none"}},
		2: {rows: []string{`\(sandbox\)\s+\w+\s+non-existent\s+running  <- changed`, `app\s+\w+\s+non-existent\s+running  <- changed`},
			events: []string{"ContainerStarted(", "ContainerStarted("}},
		3: {rows: []string{`app\s+\w+\s+running\s+exited  <- changed`}, events: []string{"events sent: ContainerDied("}},
		4: {rows: []string{`app\s+\w+\s+exited\s+non-existent  <- changed`}, events: []string{"events sent: ContainerRemoved("}},
		5: {events: []string{"events sent: none"}},
	}
	for i := 1; i <= 5; i++ {
		for _, r := range want[i].rows {
			if !regexp.MustCompile(r).MatchString(parts[i]) {
				t.Errorf("relist #%d lacks a row matching %q:\n%s", i, r, parts[i])
			}
		}
		for _, e := range want[i].events {
			if strings.Count(parts[i], e) < countOf(want[i].events, e) {
				t.Errorf("relist #%d lacks %q:\n%s", i, e, parts[i])
			}
		}
	}
	if !strings.Contains(parts[2], "cache.Set(lab07/step: 1 sandbox(es), 1 container(s))") || !strings.Contains(parts[2], "cache.UpdateTime(") {
		t.Errorf("relist #2 does not show the cache writes:\n%s", parts[2])
	}
	for _, h := range []string{
		"before any relist, Healthy() = false: pleg has yet to be successful",
		"Healthy() = false: pleg was last seen active 3m1s ago; threshold is 3m0s",
		"Healthy() = true",
	} {
		if !strings.Contains(s, h) {
			t.Errorf("output lacks %q", h)
		}
	}
}

// TestLiveEvents: the PLEG running on its own reports what a learner does
// from another terminal — with the control API's curl command exactly as
// printed, and CRI calls as crictl makes them.
func TestLiveEvents(t *testing.T) {
	t.Setenv("LABS_STATE_DIR", t.TempDir())
	o := opts()
	o.steps = false
	lab := testenv.StartLab(t, func(ctx context.Context, out io.Writer, onReady func(*plegview.Mock)) error {
		return run(ctx, o, labenv.NewPrinter(out), onReady)
	})
	m, out := lab.L, lab.Out
	out.WaitLine(t, 30*time.Second, "ContainerStarted", "lab07/web nginx")
	out.WaitLine(t, 30*time.Second, "ContainerStarted", "lab07/web sidecar")
	out.WaitLine(t, 30*time.Second, "ContainerStarted", "lab07/web sandbox")

	ctx := context.Background()
	c, err := cri.Dial(ctx, m.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nginx := containerID(t, c, "nginx")

	// The curl line of the guide, run as printed.
	curl := regexp.MustCompile(`(?m)^\s+(curl -s --unix-socket .*)$`).FindStringSubmatch(out.String())
	if curl == nil {
		t.Fatalf("no curl command in the guide:\n%s", out)
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Logf("curl is not installed (CI installs it): making the container exit through the control client instead")
		if err := fakecri.NewControlClient(m.Control).SetContainerExited(ctx, nginx, 137, "OOMKilled"); err != nil {
			t.Fatal(err)
		}
	} else if b, err := exec.Command("sh", "-c", curl[1]).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", curl[1], err, b)
	}
	out.WaitLine(t, 30*time.Second, "ContainerDied", "lab07/web nginx")
	st, err := c.ContainerStatus(ctx, nginx)
	if err != nil || st.ExitCode != 137 || st.Reason != "OOMKilled" {
		t.Errorf("nginx after the curl: %v %v", st, err)
	}

	if err := c.RemoveContainer(ctx, nginx); err != nil {
		t.Fatal(err)
	}
	out.WaitLine(t, 30*time.Second, "ContainerRemoved", "lab07/web nginx")

	// crictl create + start with the files the guide names.
	sb := sandboxID(t, c)
	podCfg := readJSON(t, filepath.Join(m.Dir, "sandbox.json"), &runtimeapi.PodSandboxConfig{})
	extraCfg := readJSON(t, filepath.Join(m.Dir, "extra.json"), &runtimeapi.ContainerConfig{})
	if extraCfg.Metadata.GetName() != "extra" || podCfg.Metadata.GetName() != "web" {
		t.Fatalf("extra.json %+v, sandbox.json %+v", extraCfg, podCfg)
	}
	// The PLEG files a container under the pod its pod-UID label names:
	// extra.json must name the demo pod's, or the PLEG would see a second,
	// phantom pod of the same name.
	if uid := extraCfg.Labels[cri.LabelPodUID]; uid == "" || uid != podCfg.Metadata.GetUid() {
		t.Fatalf("extra.json's %s is %q, the demo pod's UID is %q", cri.LabelPodUID, uid, podCfg.Metadata.GetUid())
	}
	id, err := c.StartContainer(ctx, sb, podCfg, extraCfg)
	if err != nil {
		t.Fatal(err)
	}
	out.WaitLine(t, 30*time.Second, "ContainerStarted", "lab07/web extra", id[:13])
	pods, err := plegruntime.New(c).GetPods(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 1 || len(pods[0].Containers) != 2 || string(pods[0].ID) != podCfg.Metadata.GetUid() {
		for _, p := range pods {
			t.Logf("pod %s/%s uid %q: %d containers", p.Namespace, p.Name, p.ID, len(p.Containers))
		}
		t.Fatalf("want one pod (uid %s) with sidecar and extra", podCfg.Metadata.GetUid())
	}
}

// TestBadInput: clear errors, no hang.
func TestBadInput(t *testing.T) {
	t.Setenv("LABS_STATE_DIR", t.TempDir())
	for name, edit := range map[string]func(*options){
		"threshold below period": func(o *options) { o.relistThreshold = o.relistPeriod / 2 },
		"no such socket":         func(o *options) { o.runtime.Endpoint = "unix:///nonexistent/cri.sock" },
		"not a mock":             func(o *options) { o.runtime.Endpoint = "unix://" + startBareSocket(t) },
		"containerd":             func(o *options) { o.runtime.Kind = labruntime.Containerd },
	} {
		t.Run(name, func(t *testing.T) {
			o := opts()
			edit(&o)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := run(ctx, o, labenv.NewPrinter(io.Discard), nil)
			if err == nil || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("run = %v, want a clear error", err)
			}
			t.Logf("%s: %v", name, err)
		})
	}
}

// TestWatchAnotherMock: --cri-endpoint watches a mock someone else serves
// (lab 06's), found together with its control API.
func TestWatchAnotherMock(t *testing.T) {
	t.Setenv("LABS_STATE_DIR", t.TempDir())
	dir, err := os.MkdirTemp("", "lab07-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// lab 06's mock has the course's images, as our containerd does
	srv, err := fakecri.Start(filepath.Join(dir, "mockcri.sock"), fakecri.WithImages(labruntime.BusyboxImage))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	o := opts()
	o.live = false
	o.runtime.Endpoint = srv.Endpoint()
	out := &testenv.SyncBuffer{}
	if err := run(context.Background(), o, labenv.NewPrinter(out), nil); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	if !strings.Contains(out.String(), "a mock CRI runtime started by someone else") || !strings.Contains(out.String(), "events sent: ContainerDied(") {
		t.Errorf("output:\n%s", out)
	}
}

func containerID(t *testing.T, c *cri.Client, name string) string {
	t.Helper()
	cs, err := c.Runtime.ListContainers(context.Background(), &runtimeapi.ContainerFilter{LabelSelector: map[string]string{cri.LabelContainerName: name}})
	if err != nil || len(cs) != 1 {
		t.Fatalf("container %s: %v %v", name, cs, err)
	}
	return cs[0].Id
}

func sandboxID(t *testing.T, c *cri.Client) string {
	t.Helper()
	sbs, err := c.Pods(context.Background(), map[string]string{cri.LabelPodName: "web"})
	if err != nil || len(sbs) != 1 {
		t.Fatalf("sandbox web: %v %v", sbs, err)
	}
	return sbs[0].Id
}

func countOf(list []string, s string) (n int) {
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// readJSON reads a request file as crictl does: JSON in the CRI's field
// names.
func readJSON[T any](t *testing.T, path string, v *T) *T {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// startBareSocket listens on a unix socket that is not our mock.
func startBareSocket(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "lab07-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := filepath.Join(dir, "other.sock")
	ln, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return p
}
