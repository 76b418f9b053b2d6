package fakecri

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/internal/testenv"
)

// TestMain fails the package if any test leaks a goroutine: processes,
// execs, streaming sessions and servers must all end on Close/Stop.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// patient is how long tests wait for something that should take
// milliseconds; generous so a loaded CI machine never flakes.
const patient = 20 * time.Second

func newRuntime(t *testing.T, opts ...Option) *Runtime {
	t.Helper()
	r := New(opts...)
	t.Cleanup(r.Close)
	return r
}

func tctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*patient)
	t.Cleanup(cancel)
	return c
}

func podConfig(name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "ns", Uid: "uid-" + name},
		Labels:   map[string]string{"app": name},
		Annotations: map[string]string{
			"note": "annotations must come back unchanged",
		},
	}
}

func runPod(t *testing.T, r *Runtime, cfg *runtimeapi.PodSandboxConfig) string {
	t.Helper()
	resp, err := r.RunPodSandbox(tctx(t), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	return resp.PodSandboxId
}

func ctrConfig(name string, cmd ...string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: "registry.k8s.io/pause:3.10.2"},
		Command:  cmd,
		Labels:   map[string]string{"ctr": name},
	}
}

func create(t *testing.T, r *Runtime, sb string, cfg *runtimeapi.ContainerConfig) string {
	t.Helper()
	resp, err := r.CreateContainer(tctx(t), &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: cfg})
	if err != nil {
		t.Fatalf("CreateContainer %s: %v", cfg.GetMetadata().GetName(), err)
	}
	return resp.ContainerId
}

func start(t *testing.T, r *Runtime, id string) {
	t.Helper()
	if _, err := r.StartContainer(tctx(t), &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
}

func createStart(t *testing.T, r *Runtime, sb string, cfg *runtimeapi.ContainerConfig) string {
	t.Helper()
	id := create(t, r, sb, cfg)
	start(t, r, id)
	return id
}

func ctrStatus(t *testing.T, r *Runtime, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	resp, err := r.ContainerStatus(tctx(t), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		t.Fatalf("ContainerStatus: %v", err)
	}
	return resp.Status
}

func sbStatus(t *testing.T, r *Runtime, id string) *runtimeapi.PodSandboxStatus {
	t.Helper()
	resp, err := r.PodSandboxStatus(tctx(t), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil {
		t.Fatalf("PodSandboxStatus: %v", err)
	}
	return resp.Status
}

func waitExited(t *testing.T, r *Runtime, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	var st *runtimeapi.ContainerStatus
	testenv.PollTrue(t, "container "+id[:12]+" to exit", patient, func() bool {
		st = ctrStatus(t, r, id)
		return st.State == runtimeapi.ContainerState_CONTAINER_EXITED
	})
	return st
}

// wantCode checks a gRPC status code and that the message names id.
func wantCode(t *testing.T, err error, code codes.Code, id string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("want %s, got %v", code, err)
	}
	if id != "" && !strings.Contains(err.Error(), id) {
		t.Fatalf("error %q does not name %q", err, id)
	}
}

// shortTempDir returns a folder short enough for unix socket paths
// (t.TempDir can exceed the 107-byte limit with long test names).
func shortTempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "cri")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func logDirPod(t *testing.T, name string) (*runtimeapi.PodSandboxConfig, string) {
	dir := filepath.Join(t.TempDir(), "pods", name)
	cfg := podConfig(name)
	cfg.LogDirectory = dir
	return cfg, dir
}
