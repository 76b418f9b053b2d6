package main

import (
	"context"
	"encoding/json"
	"errors"
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

	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/cri"
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
	return options{relistPeriod: 200 * time.Millisecond, relistThreshold: 3 * time.Minute, steps: true, live: true}
}

// TestRelistStepByStep: the four relists print the diff and the events a
// learner reads in the README, and the health check trips after 3m.
func TestRelistStepByStep(t *testing.T) {
	t.Setenv("LABS_STATE_DIR", t.TempDir())
	o := opts()
	o.live = false
	out := &testenv.SyncBuffer{}
	if err := run(context.Background(), o, out, nil); err != nil {
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
	out := &testenv.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	live := make(chan *mock, 1)
	go func() { errc <- run(ctx, o, out, func(m *mock) { live <- m }) }()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("run: %v", err)
		}
		t.Logf("lab output:\n%s", out)
	}()
	var m *mock
	select {
	case m = <-live:
	case err := <-errc:
		errc <- err
		t.Fatalf("run ended early: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the live part did not start")
	}
	waitFor(t, out, `ContainerStarted\s+lab07/web nginx`)
	waitFor(t, out, `ContainerStarted\s+lab07/web sidecar`)
	waitFor(t, out, `ContainerStarted\s+lab07/web sandbox`)

	c, err := cri.Dial(ctx, m.endpoint)
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
		if err := fakecri.NewControlClient(m.control).SetContainerExited(ctx, nginx, 137, "OOMKilled"); err != nil {
			t.Fatal(err)
		}
	} else if b, err := exec.Command("sh", "-c", curl[1]).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", curl[1], err, b)
	}
	waitFor(t, out, `ContainerDied\s+lab07/web nginx`)
	st, err := c.ContainerStatus(ctx, nginx)
	if err != nil || st.ExitCode != 137 || st.Reason != "OOMKilled" {
		t.Errorf("nginx after the curl: %v %v", st, err)
	}

	if err := c.RemoveContainer(ctx, nginx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, out, `ContainerRemoved\s+lab07/web nginx`)

	// crictl create + start with the files the guide names.
	sb := sandboxID(t, c)
	podCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "lab07"}}
	extraCfg := readContainerJSON(t, filepath.Join(m.dir, "extra.json"))
	id, err := c.StartContainer(ctx, sb, podCfg, extraCfg)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, out, `ContainerStarted\s+lab07/web extra`)
	if !strings.Contains(out.String(), id[:13]) {
		t.Errorf("the event does not name the container %.13s", id)
	}
}

// TestBadInput: clear errors, no hang.
func TestBadInput(t *testing.T) {
	t.Setenv("LABS_STATE_DIR", t.TempDir())
	for name, edit := range map[string]func(*options){
		"threshold below period": func(o *options) { o.relistThreshold = o.relistPeriod / 2 },
		"no such socket":         func(o *options) { o.criEndpoint = "unix:///nonexistent/cri.sock" },
		"not a mock":             func(o *options) { o.criEndpoint = "unix://" + startBareSocket(t) },
	} {
		t.Run(name, func(t *testing.T) {
			o := opts()
			edit(&o)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := run(ctx, o, &testenv.SyncBuffer{}, nil)
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
	srv, err := fakecri.Start(filepath.Join(dir, "mockcri.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	o := opts()
	o.live = false
	o.criEndpoint = srv.Endpoint()
	out := &testenv.SyncBuffer{}
	if err := run(context.Background(), o, out, nil); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	if !strings.Contains(out.String(), "a mock CRI runtime started by someone else") || !strings.Contains(out.String(), "events sent: ContainerDied(") {
		t.Errorf("output:\n%s", out)
	}
}

func waitFor(t *testing.T, out *testenv.SyncBuffer, pattern string) {
	t.Helper()
	re := regexp.MustCompile(pattern)
	deadline := time.Now().Add(30 * time.Second)
	for !re.MatchString(out.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q within 30s:\n%s", pattern, out)
		}
		time.Sleep(50 * time.Millisecond)
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

// readContainerJSON reads a request file as crictl does: JSON in the CRI's
// field names.
func readContainerJSON(t *testing.T, path string) *runtimeapi.ContainerConfig {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg runtimeapi.ContainerConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if cfg.Metadata.GetName() != "extra" || cfg.Labels[cri.LabelPodName] != "web" {
		t.Fatalf("%s: %+v", path, &cfg)
	}
	return &cfg
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
