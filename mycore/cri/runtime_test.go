package cri_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/internal/critest"
	"kubelet-labs/mycore/cri"
)

// behaviour is one thing every CRI runtime must do the same way. realOnly
// marks what only a real runtime can show (files on disk, signals).
type behaviour struct {
	name     string
	realOnly bool
	run      func(t *testing.T, rt critest.Runtime, c *cri.Client)
}

var behaviours = []behaviour{
	{name: "Version", run: testVersion},
	{name: "Status", run: testStatus},
	{name: "ImageListed", run: testImageListed},
	{name: "PodLifecycle", run: testPodLifecycle},
	{name: "ExecExitCode", run: testExecExitCode},
	{name: "ContainerExits", run: testContainerExits},
	{name: "StopMissingContainer", run: testStopMissing},
	{name: "ContainerLog", run: testContainerLog},
	// a real sh has redirections; the mock's little shell does not
	{name: "ExecStderr", realOnly: true, run: testExecStderr},
	{name: "ContainerLogStderr", realOnly: true, run: testContainerLogStderr},
}

// Container scripts stay in the sh subset both runtimes run: no pipes,
// redirections or $(...) unless the behaviour is realOnly.

// TestRuntimes runs every behaviour against every runtime in critest.Cases.
func TestRuntimes(t *testing.T) {
	for _, rc := range critest.Cases() {
		t.Run(rc.Name, func(t *testing.T) {
			rt := rc.Setup(t)
			c := critest.Dial(t, rt)
			for _, b := range behaviours {
				t.Run(b.name, func(t *testing.T) {
					if b.realOnly && !rt.Real {
						t.Skipf("%s is a mock: %s needs a real runtime", rt.Name, b.name)
					}
					b.run(t, rt, c)
				})
			}
		})
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func testVersion(t *testing.T, rt critest.Runtime, c *cri.Client) {
	info, err := c.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.APIVersion != "v1" {
		t.Errorf("RuntimeApiVersion = %q, want v1", info.APIVersion)
	}
	if info.RuntimeName == "" || info.RuntimeVersion == "" {
		t.Errorf("runtime name/version empty: %+v", info)
	}
	t.Logf("%s %s, CRI %s", info.RuntimeName, info.RuntimeVersion, info.APIVersion)
}

func testStatus(t *testing.T, rt critest.Runtime, c *cri.Client) {
	info, err := c.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range []string{runtimeapi.RuntimeReady, runtimeapi.NetworkReady} {
		if !info.Ready(cond) {
			t.Errorf("%s is not true: %v", cond, info.Conditions)
		}
	}
}

func testImageListed(t *testing.T, rt critest.Runtime, c *cri.Client) {
	imgs, err := c.ImageList(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range imgs {
		if slices.Contains(img.RepoTags, rt.BusyboxImage) {
			if img.Id == "" || img.Size == 0 {
				t.Errorf("image %s: want an Id and a size > 0 (the kubelet insists), got %q, %d", rt.BusyboxImage, img.Id, img.Size)
			}
			return
		}
	}
	t.Errorf("%s not in ListImages (%d images)", rt.BusyboxImage, len(imgs))
}

// startBusybox runs a pod with one busybox container running script.
func startBusybox(t *testing.T, rt critest.Runtime, c *cri.Client, name, script string) (cri.Pod, string, string) {
	ctx := ctxT(t)
	p := critest.Pod(t, name)
	t0 := time.Now()
	podID, podCfg := critest.RunPod(t, c, p)
	t.Logf("RunPodSandbox: %v", time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	ctrID, err := c.StartContainer(ctx, podID, podCfg, p.ContainerConfig(cri.Container{
		Name: "main", Image: rt.BusyboxImage, Command: []string{"sh", "-c", script},
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("CreateContainer+StartContainer: %v", time.Since(t0).Round(time.Millisecond))
	return p, podID, ctrID
}

func testPodLifecycle(t *testing.T, rt critest.Runtime, c *cri.Client) {
	ctx := ctxT(t)
	p, podID, ctrID := startBusybox(t, rt, c, "lifecycle", "sleep 3600")

	pods, err := c.Pods(ctx, p.Labels)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 1 || pods[0].Id != podID || pods[0].State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("ListPodSandbox(our label) = %v, want our sandbox READY", pods)
	}
	if md := pods[0].Metadata; md.Name != p.Name || md.Namespace != p.Namespace || md.Uid != p.UID {
		t.Errorf("sandbox metadata = %v, want %s/%s %s", md, p.Namespace, p.Name, p.UID)
	}
	st, err := c.WaitContainerState(ctx, ctrID, runtimeapi.ContainerState_CONTAINER_RUNNING, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if st.Metadata.GetName() != "main" || st.CreatedAt == 0 || st.ImageRef == "" {
		t.Errorf("container status lacks what the kubelet needs (name, CreatedAt, ImageRef): %v", st)
	}

	t0 := time.Now()
	res, err := c.Exec(ctx, ctrID, []string{"echo", "hello", "from", "exec"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ExecSync: %v", time.Since(t0).Round(time.Millisecond))
	if got := string(res.Stdout); got != "hello from exec\n" || res.ExitCode != 0 {
		t.Errorf("exec echo: stdout %q exit %d, want %q exit 0", got, res.ExitCode, "hello from exec\n")
	}

	if err := c.StopContainer(ctx, ctrID, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitContainerState(ctx, ctrID, runtimeapi.ContainerState_CONTAINER_EXITED, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	if err := c.RemovePod(ctx, podID, time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("RemovePod: %v", time.Since(t0).Round(time.Millisecond))
	if pods, _ := c.Pods(ctx, p.Labels); len(pods) != 0 {
		t.Errorf("sandbox still listed after RemovePod: %v", pods)
	}
	if ctrs, _ := c.Containers(ctx, podID); len(ctrs) != 0 {
		t.Errorf("containers still listed after RemovePod: %v", ctrs)
	}
}

func testExecExitCode(t *testing.T, rt critest.Runtime, c *cri.Client) {
	ctx := ctxT(t)
	_, _, ctrID := startBusybox(t, rt, c, "exitcode", "sleep 3600")
	if _, err := c.WaitContainerState(ctx, ctrID, runtimeapi.ContainerState_CONTAINER_RUNNING, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	res, err := c.Exec(ctx, ctrID, []string{"sh", "-c", "echo oops; exit 3"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || string(res.Stdout) != "oops\n" {
		t.Errorf("exit %d stdout %q, want exit 3 stdout \"oops\\n\"", res.ExitCode, res.Stdout)
	}
}

func testExecStderr(t *testing.T, rt critest.Runtime, c *cri.Client) {
	ctx := ctxT(t)
	_, _, ctrID := startBusybox(t, rt, c, "stderr", "sleep 3600")
	if _, err := c.WaitContainerState(ctx, ctrID, runtimeapi.ContainerState_CONTAINER_RUNNING, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	res, err := c.Exec(ctx, ctrID, []string{"sh", "-c", "echo oops >&2; exit 3"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || strings.TrimSpace(string(res.Stderr)) != "oops" || len(res.Stdout) != 0 {
		t.Errorf("exit %d stdout %q stderr %q, want exit 3, stderr \"oops\" only", res.ExitCode, res.Stdout, res.Stderr)
	}
}

func testContainerExits(t *testing.T, rt critest.Runtime, c *cri.Client) {
	ctx := ctxT(t)
	_, _, ctrID := startBusybox(t, rt, c, "exits", "exit 7")
	st, err := c.WaitContainerState(ctx, ctrID, runtimeapi.ContainerState_CONTAINER_EXITED, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if st.ExitCode != 7 || st.FinishedAt == 0 {
		t.Errorf("exited container: exit code %d, finishedAt %d; want 7 and a time", st.ExitCode, st.FinishedAt)
	}
}

func testStopMissing(t *testing.T, rt critest.Runtime, c *cri.Client) {
	// containerd 1.6 says NotFound, newer runtimes say OK: both mean "done".
	missing := strings.Repeat("0", 64)
	if err := c.StopContainer(ctxT(t), missing, time.Second); err != nil {
		t.Errorf("StopContainer(missing) = %v, want nil", err)
	}
	if err := c.RemovePod(ctxT(t), missing, time.Second); err != nil {
		t.Errorf("RemovePod(missing) = %v, want nil", err)
	}
}

// waitLog polls the container's log until it has n lines: the runtime
// copies the container's output into the file asynchronously.
func waitLog(t *testing.T, c *cri.Client, ctrID string, n int) []cri.LogLine {
	ctx := ctxT(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		lines, err := c.ContainerLog(ctx, ctrID)
		if err == nil && len(lines) >= n {
			for _, l := range lines {
				if l.Time.IsZero() {
					t.Errorf("log line without time: %+v", l)
				}
			}
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("log has %d lines after 30s, want %d: %v, %v", len(lines), n, lines, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func testContainerLog(t *testing.T, rt critest.Runtime, c *cri.Client) {
	_, _, ctrID := startBusybox(t, rt, c, "logs", "echo line one; echo line two; sleep 3600")
	lines := waitLog(t, c, ctrID, 2)
	if len(lines) != 2 || lines[0].Text != "line one" || lines[1].Text != "line two" ||
		lines[0].Stream != "stdout" || lines[1].Stream != "stdout" {
		t.Errorf("log = %+v, want stdout \"line one\", \"line two\"", lines)
	}
}

func testContainerLogStderr(t *testing.T, rt critest.Runtime, c *cri.Client) {
	_, _, ctrID := startBusybox(t, rt, c, "logs-stderr", "echo to stdout; echo to stderr >&2; sleep 3600")
	got := map[string]string{}
	for _, l := range waitLog(t, c, ctrID, 2) {
		got[l.Stream] = l.Text
	}
	if got["stdout"] != "to stdout" || got["stderr"] != "to stderr" {
		t.Errorf("log streams = %v, want one stdout and one stderr line", got)
	}
}
