package fakecri

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace/noop"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
)

// populate creates n running containers, two per pod (pods are small in
// practice; the relist cost is per container and per pod).
func populate(b *testing.B, r *Runtime, n int) {
	b.Helper()
	c := context.Background()
	for i := 0; i < n/2; i++ {
		pod := podConfig(fmt.Sprintf("pod-%05d", i))
		pod.Labels["io.kubernetes.pod.namespace"] = "bench"
		sb, err := r.RunPodSandbox(c, &runtimeapi.RunPodSandboxRequest{Config: pod})
		if err != nil {
			b.Fatal(err)
		}
		for _, name := range []string{"app", "sidecar"} {
			cfg := ctrConfig(name)
			cfg.Labels["io.kubernetes.pod.name"] = pod.Metadata.Name
			cfg.Annotations = map[string]string{"io.kubernetes.container.hash": "abcdef12", "io.kubernetes.container.restartCount": "0"}
			cr, err := r.CreateContainer(c, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: cfg})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := r.StartContainer(c, &runtimeapi.StartContainerRequest{ContainerId: cr.ContainerId}); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// relist is what a full generic-PLEG relist plus status refresh costs the
// runtime: list sandboxes, list containers, then every status
// (pkg/kubelet/pleg/generic.go relist + kuberuntime GetPodStatus, v1.36.3).
func relist(b *testing.B, rs criapi.RuntimeService) {
	c := context.Background()
	sbs, err := rs.ListPodSandbox(c, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctrs, err := rs.ListContainers(c, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, sb := range sbs {
		if _, err := rs.PodSandboxStatus(c, sb.Id, false); err != nil {
			b.Fatal(err)
		}
	}
	for _, ctr := range ctrs {
		if _, err := rs.ContainerStatus(c, ctr.Id, false); err != nil {
			b.Fatal(err)
		}
	}
}

// inProcess adapts the Runtime to the kubelet's RuntimeService shape for
// the few calls relist makes, so both paths run the same loop.
type inProcess struct {
	criapi.RuntimeService // nil: only the methods below are used
	r                     *Runtime
}

func (p inProcess) ListPodSandbox(c context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	resp, err := p.r.ListPodSandbox(c, &runtimeapi.ListPodSandboxRequest{Filter: f})
	return resp.GetItems(), err
}

func (p inProcess) ListContainers(c context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	resp, err := p.r.ListContainers(c, &runtimeapi.ListContainersRequest{Filter: f})
	return resp.GetContainers(), err
}

func (p inProcess) PodSandboxStatus(c context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	return p.r.PodSandboxStatus(c, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: verbose})
}

func (p inProcess) ContainerStatus(c context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	return p.r.ContainerStatus(c, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: verbose})
}

func benchServer(b *testing.B, n int) (*Runtime, criapi.RuntimeService) {
	b.Helper()
	dir, err := os.MkdirTemp("", "crib") // short: unix socket paths are limited
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	srv, err := Start(filepath.Join(dir, "cri.sock"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Stop)
	populate(b, srv.Runtime(), n)
	rs, err := remote.NewRemoteRuntimeService(context.Background(), srv.Endpoint(), time.Minute, noop.NewTracerProvider(), false)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rs.Close(context.Background()) })
	return srv.Runtime(), rs
}

func BenchmarkListContainers10k(b *testing.B) {
	r, rs := benchServer(b, 10_000)
	b.Run("in-process", func(b *testing.B) {
		c := context.Background()
		for b.Loop() {
			resp, _ := r.ListContainers(c, &runtimeapi.ListContainersRequest{})
			if len(resp.Containers) != 10_000 {
				b.Fatalf("%d containers", len(resp.Containers))
			}
		}
	})
	b.Run("grpc", func(b *testing.B) {
		c := context.Background()
		for b.Loop() {
			list, err := rs.ListContainers(c, nil)
			if err != nil || len(list) != 10_000 {
				b.Fatalf("%d containers: %v", len(list), err)
			}
		}
	})
	b.Run("grpc-filtered-running", func(b *testing.B) {
		c := context.Background()
		f := &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
		for b.Loop() {
			if _, err := rs.ListContainers(c, f); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkRelist(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		r, rs := benchServer(b, n)
		b.Run(fmt.Sprintf("%dk-containers/in-process", n/1000), func(b *testing.B) {
			for b.Loop() {
				relist(b, inProcess{r: r})
			}
		})
		b.Run(fmt.Sprintf("%dk-containers/grpc", n/1000), func(b *testing.B) {
			for b.Loop() {
				relist(b, rs)
			}
		})
	}
}
