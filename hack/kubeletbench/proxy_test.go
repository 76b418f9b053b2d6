package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/internal/labruntime"
	"kubelet-labs/mycore/cri"
	"kubelet-labs/mylib/fakecri"
)

// mockBehindProxy is a mock CRI and the counting proxy in front of it.
func mockBehindProxy(t *testing.T) (*fakecri.Server, *proxy) {
	t.Helper()
	dir := t.TempDir()
	m, err := fakecri.Start(filepath.Join(dir, "mock.sock"), fakecri.WithPauseImage(labruntime.PauseImage), fakecri.WithImages(labruntime.BusyboxImage))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	p, err := startProxy(filepath.Join(dir, "cri.sock"), m.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	return m, p
}

func sandbox(ns, name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: ns, Uid: ns + "-" + name},
		Labels:   map[string]string{"io.kubernetes.pod.namespace": ns, "io.kubernetes.pod.name": name},
	}
}

// TestProxyForwardsAndCounts: a CRI client through the proxy works as
// without it — answers, and the runtime's errors with their codes — and
// every call is counted by its full method name.
func TestProxyForwardsAndCounts(t *testing.T) {
	_, p := mockBehindProxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := cri.Dial(ctx, p.endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, err := c.Runtime.RunPodSandbox(ctx, sandbox(nsPrefix+"x", "a"), "")
	if err != nil {
		t.Fatalf("RunPodSandbox through the proxy: %v", err)
	}
	pods, err := c.Pods(ctx, nil)
	if err != nil || len(pods) != 1 || pods[0].Id != id {
		t.Fatalf("ListPodSandbox through the proxy: %v %v, want the one sandbox %s", pods, err, id)
	}
	_, err = c.Runtime.PodSandboxStatus(ctx, "no-such-sandbox", false)
	if status.Code(err) != codes.NotFound {
		t.Errorf("the status of a missing sandbox: %v, want the runtime's NotFound through the proxy", err)
	}
	got := p.counts()
	for method, want := range map[string]int64{methodRunSandbox: 1, methodListSandbox: 1, "/runtime.v1.RuntimeService/PodSandboxStatus": 1} {
		if got[method] != want {
			t.Errorf("%s counted %d times, want %d; all:\n%s", method, got[method], want, methodCounts(got))
		}
	}
	if got["/runtime.v1.RuntimeService/Version"] < 1 {
		t.Errorf("Dial's Version call not counted:\n%s", methodCounts(got))
	}
}

// TestPrepareRemovesOursRefusesOthers: before a run the runtime is
// emptied of the benchmark's sandboxes, and one that holds anyone
// else's is refused, saying why.
func TestPrepareRemovesOursRefusesOthers(t *testing.T) {
	m, _ := mockBehindProxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rt := m.Runtime()
	for _, cfg := range []*runtimeapi.PodSandboxConfig{sandbox(nsPrefix+"r1-real-mock", "p-000"), sandbox(nsPrefix+"r1-ours-mock", "p-001")} {
		if _, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg}); err != nil {
			t.Fatal(err)
		}
	}
	if err := prepareContainerd(ctx, m.SocketPath()); err != nil {
		t.Fatalf("only the benchmark's sandboxes: %v", err)
	}
	left, _ := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if n := len(left.Items); n != 0 {
		t.Errorf("%d sandboxes left, want none", n)
	}

	if _, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandbox("default", "web")}); err != nil {
		t.Fatal(err)
	}
	err := prepareContainerd(ctx, m.SocketPath())
	if err == nil || !strings.Contains(err.Error(), "not the benchmark's (1 of them running; first: default/web)") || !strings.Contains(err.Error(), "the real kubelet would stop the running ones") {
		t.Errorf("another's sandbox: got %v, want it refused and named", err)
	}
	left, _ = rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if n := len(left.Items); n != 1 {
		t.Errorf("%d sandboxes left, want the other's one untouched", n)
	}
}

// TestGuardFindsAnIntruder: a sandbox that is not the benchmark's,
// appearing while a kubelet runs, is reported with its name (the run then
// kills its kubelet before that kubelet can stop it); the benchmark's own
// are not.
func TestGuardFindsAnIntruder(t *testing.T) {
	m, _ := mockBehindProxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	found := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		guardContainerd(ctx, m.SocketPath(), 10*time.Millisecond, func(pod string) { found <- pod })
	}()
	rt := m.Runtime()
	if _, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandbox(nsPrefix+"r1-real-containerd", "p-000")}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandbox("kube-system", "kube-proxy-x")}); err != nil {
		t.Fatal(err)
	}
	select {
	case pod := <-found:
		if pod != "kube-system/kube-proxy-x" {
			t.Errorf("the guard reported %q, want kube-system/kube-proxy-x", pod)
		}
	case <-ctx.Done():
		t.Fatal("the guard never reported the other's sandbox")
	}
	<-done // it returns after reporting: no goroutine left
}
