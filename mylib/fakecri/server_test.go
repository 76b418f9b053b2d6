package fakecri

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func startServer(t *testing.T, opts ...Option) *Server {
	t.Helper()
	srv, err := Start(filepath.Join(shortTempDir(t), "cri.sock"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

func dial(t *testing.T, srv *Server) (runtimeapi.RuntimeServiceClient, runtimeapi.ImageServiceClient) {
	t.Helper()
	conn, err := grpc.NewClient(srv.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)
}

func TestStartStop(t *testing.T) {
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "cri.sock")
	srv, err := Start(sock)
	if err != nil {
		t.Fatal(err)
	}
	if srv.Endpoint() != "unix://"+sock {
		t.Fatalf("endpoint %q", srv.Endpoint())
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v %v, want a 0600 socket", fi, err)
	}
	// A second server on the same live socket is refused, and the first
	// keeps working.
	if _, err := Start(sock); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second Start: %v", err)
	}
	rc, _ := dial(t, srv)
	if v, err := rc.Version(tctx(t), &runtimeapi.VersionRequest{}); err != nil || v.RuntimeApiVersion != "v1" {
		t.Fatalf("Version: %v %v", v, err)
	}
	srv.Stop()
	srv.Stop() // idempotent
	for _, p := range []string{sock, filepath.Join(dir, "cri-control.sock")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s left behind: %v", p, err)
		}
	}
}

func TestStartReplacesStaleSocket(t *testing.T) {
	sock := filepath.Join(shortTempDir(t), "cri.sock")
	// A socket file nobody listens on: what a killed server leaves.
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	srv, err := Start(sock)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	srv.Stop()
}

func TestStartRefusesBadPaths(t *testing.T) {
	dir := shortTempDir(t)
	regular := filepath.Join(dir, "file.sock")
	os.WriteFile(regular, []byte("precious"), 0o644)
	cases := map[string]string{
		regular:                                 "not a socket",
		filepath.Join(regular, "sub", "x.sock"): "cannot create socket folder",
		"/tmp/" + strings.Repeat("x", 110) + ".sock": "limit",
	}
	for path, want := range cases {
		if _, err := Start(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Start(%s): %v, want error containing %q", path, err, want)
		}
	}
	if b, _ := os.ReadFile(regular); string(b) != "precious" {
		t.Fatal("Start clobbered a regular file")
	}
}

func TestGRPCErrorsAndUnimplemented(t *testing.T) {
	srv := startServer(t)
	rc, ic := dial(t, srv)
	c := tctx(t)
	_, err := rc.CheckpointContainer(c, &runtimeapi.CheckpointContainerRequest{ContainerId: "x"})
	wantCode(t, err, codes.Unimplemented, "")
	_, err = rc.ContainerStatus(c, &runtimeapi.ContainerStatusRequest{ContainerId: "deadbeef"})
	wantCode(t, err, codes.NotFound, "deadbeef")
	_, err = rc.RunPodSandbox(c, &runtimeapi.RunPodSandboxRequest{})
	wantCode(t, err, codes.InvalidArgument, "")
	_, err = ic.PullImage(c, &runtimeapi.PullImageRequest{})
	wantCode(t, err, codes.InvalidArgument, "")
	// Every request shape the server may see without a panic: nil
	// sub-messages everywhere.
	calls := []func() error{
		func() error { _, err := rc.StopPodSandbox(c, &runtimeapi.StopPodSandboxRequest{}); return err },
		func() error { _, err := rc.ListContainers(c, &runtimeapi.ListContainersRequest{}); return err },
		func() error { _, err := rc.ListPodSandbox(c, &runtimeapi.ListPodSandboxRequest{}); return err },
		func() error { _, err := rc.ExecSync(c, &runtimeapi.ExecSyncRequest{}); return err },
		func() error { _, err := rc.Exec(c, &runtimeapi.ExecRequest{}); return err },
		func() error { _, err := rc.Attach(c, &runtimeapi.AttachRequest{}); return err },
		func() error { _, err := rc.PortForward(c, &runtimeapi.PortForwardRequest{}); return err },
		func() error {
			_, err := rc.UpdateRuntimeConfig(c, &runtimeapi.UpdateRuntimeConfigRequest{})
			return err
		},
		func() error {
			_, err := rc.UpdateContainerResources(c, &runtimeapi.UpdateContainerResourcesRequest{})
			return err
		},
		func() error { _, err := rc.ListContainerStats(c, &runtimeapi.ListContainerStatsRequest{}); return err },
		func() error {
			_, err := rc.ListPodSandboxStats(c, &runtimeapi.ListPodSandboxStatsRequest{})
			return err
		},
		func() error {
			_, err := rc.UpdatePodSandboxResources(c, &runtimeapi.UpdatePodSandboxResourcesRequest{})
			return err
		},
		func() error { _, err := ic.ImageStatus(c, &runtimeapi.ImageStatusRequest{}); return err },
		func() error { _, err := ic.RemoveImage(c, &runtimeapi.RemoveImageRequest{}); return err },
		func() error { _, err := ic.ListImages(c, &runtimeapi.ListImagesRequest{}); return err },
		func() error {
			_, err := rc.ListMetricDescriptors(c, &runtimeapi.ListMetricDescriptorsRequest{})
			return err
		},
		func() error {
			_, err := rc.ListPodSandboxMetrics(c, &runtimeapi.ListPodSandboxMetricsRequest{})
			return err
		},
	}
	for i, call := range calls {
		if err := call(); err != nil && status.Code(err) != codes.InvalidArgument && status.Code(err) != codes.NotFound {
			t.Errorf("call %d: %v", i, err)
		}
	}
}

func TestRuntimeInfo(t *testing.T) {
	srv := startServer(t, WithVersion("mock", "v9"), WithCgroupDriver(runtimeapi.CgroupDriver_SYSTEMD))
	rc, _ := dial(t, srv)
	c := tctx(t)
	v, err := rc.Version(c, &runtimeapi.VersionRequest{})
	if err != nil || v.RuntimeName != "mock" || v.RuntimeVersion != "v9" || v.RuntimeApiVersion != "v1" {
		t.Fatalf("version %v %v", v, err)
	}
	cfg, err := rc.RuntimeConfig(c, &runtimeapi.RuntimeConfigRequest{})
	if err != nil || cfg.Linux.CgroupDriver != runtimeapi.CgroupDriver_SYSTEMD {
		t.Fatalf("runtime config %v %v", cfg, err)
	}
	st, err := rc.Status(c, &runtimeapi.StatusRequest{Verbose: true})
	if err != nil || len(st.Status.Conditions) != 2 || st.Info["config"] == "" || len(st.RuntimeHandlers) != 2 {
		t.Fatalf("status %v %v", st, err)
	}
	// The kubelet sends the node's pod CIDR; new sandboxes use it.
	if _, err := rc.UpdateRuntimeConfig(c, &runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: &runtimeapi.RuntimeConfig{
		NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: "10.244.3.0/24"}}}); err != nil {
		t.Fatal(err)
	}
	sb, err := rc.RunPodSandbox(c, &runtimeapi.RunPodSandboxRequest{Config: podConfig("cidr")})
	if err != nil {
		t.Fatal(err)
	}
	sbst, _ := rc.PodSandboxStatus(c, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.PodSandboxId})
	if !strings.HasPrefix(sbst.Status.Network.Ip, "10.244.3.") {
		t.Fatalf("IP %q not from the new pod CIDR", sbst.Status.Network.Ip)
	}
	_, err = rc.UpdateRuntimeConfig(c, &runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: &runtimeapi.RuntimeConfig{
		NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: "not-a-cidr"}}})
	wantCode(t, err, codes.InvalidArgument, "not-a-cidr")
}

// Status reports the runtime feature supplementalGroupsPolicy as
// containerd 2.x does, and not when told to play containerd 1.6 — the
// kubelet reads it to admit a pod with supplementalGroupsPolicy: Strict.
func TestStatusFeatures(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		want bool
	}{
		{"default (containerd 2.x)", nil, true},
		{"WithSupplementalGroupsPolicy(false) (containerd 1.6)", []Option{WithSupplementalGroupsPolicy(false)}, false},
	} {
		r := newRuntime(t, tc.opts...)
		st, err := r.Status(tctx(t), &runtimeapi.StatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if got := st.GetFeatures().GetSupplementalGroupsPolicy(); got != tc.want {
			t.Errorf("%s: features.supplementalGroupsPolicy %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestCallObserver(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := startServer(t, WithCallObserver(func(c Call) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, fmt.Sprintf("%s:%v", c.Method, status.Code(c.Err)))
	}))
	rc, _ := dial(t, srv)
	rc.Version(tctx(t), &runtimeapi.VersionRequest{})
	rc.ContainerStatus(tctx(t), &runtimeapi.ContainerStatusRequest{ContainerId: "x"})
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, ",") != "Version:OK,ContainerStatus:NotFound" {
		t.Fatalf("observed %v", seen)
	}
}

// TestConcurrentUse hammers one runtime from many goroutines; run with
// -race it proves the locking (the course we replace mutated a global map
// without locks).
func TestConcurrentUse(t *testing.T) {
	r := newRuntime(t)
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := context.Background()
			for i := range 25 {
				resp, err := r.RunPodSandbox(c, &runtimeapi.RunPodSandboxRequest{Config: podConfig(fmt.Sprintf("w%d-%d", w, i))})
				if err != nil {
					errs <- err
					return
				}
				sb := resp.PodSandboxId
				cr, err := r.CreateContainer(c, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: ctrConfig("c", "sh", "-c", "while true; do echo x; sleep 0.001; done")})
				if err != nil {
					errs <- err
					return
				}
				r.StartContainer(c, &runtimeapi.StartContainerRequest{ContainerId: cr.ContainerId})
				r.ListContainers(c, &runtimeapi.ListContainersRequest{})
				r.ListPodSandboxStats(c, &runtimeapi.ListPodSandboxStatsRequest{})
				r.ExecSync(c, &runtimeapi.ExecSyncRequest{ContainerId: cr.ContainerId, Cmd: []string{"echo", "hi"}})
				if i%3 == 0 {
					r.SetContainerExited(cr.ContainerId, 1, "")
				}
				r.StopContainer(c, &runtimeapi.StopContainerRequest{ContainerId: cr.ContainerId, Timeout: 1})
				if _, err := r.RemovePodSandbox(c, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	// Readers race with the writers.
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
					r.Snapshot()
					r.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s := r.Snapshot(); len(s.Sandboxes) != 0 || len(s.Containers) != 0 {
		t.Fatalf("left over: %d sandboxes, %d containers", len(s.Sandboxes), len(s.Containers))
	}
}

func TestClosedRuntimeRefusesWork(t *testing.T) {
	r := New()
	sb := runPod(t, r, podConfig("p"))
	id := createStart(t, r, sb, ctrConfig("c", "sh", "-c", "trap '' TERM; sleep infinity"))
	r.Close()
	r.Close()
	if st := ctrStatus(t, r, id); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 137 {
		t.Fatalf("after Close: %s %d", st.State, st.ExitCode)
	}
	_, err := r.RunPodSandbox(tctx(t), &runtimeapi.RunPodSandboxRequest{Config: podConfig("q")})
	wantCode(t, err, codes.Unavailable, "")
}
