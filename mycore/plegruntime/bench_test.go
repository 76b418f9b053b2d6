package plegruntime_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/pleg"
	"k8s.io/utils/clock"

	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/plegruntime"
	"kubelet-labs/mylib/fakecri"
)

// BenchmarkRelist times the kubelet's GenericPLEG.Relist (v1.36.3) over this
// runtime and the kubelet's CRI client, through gRPC on a unix socket, with
// the mock holding n containers in pods of two:
//
//   - steady: nothing changed since the last relist — two list calls and a
//     diff; what every relist costs on a quiet node, once per second;
//
//   - all-new: a fresh PLEG sees every pod for the first time and fetches
//     each pod's status (one PodSandboxStatus + one ContainerStatus per
//     container): the kubelet's first relist after a restart.
//
//     go test ./mycore/plegruntime -run '^$' -bench Relist -benchtime 10x
func BenchmarkRelist(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("containers=%d", n), func(b *testing.B) {
			rt := populated(b, n)
			b.Run("steady", func(b *testing.B) {
				g, _ := newPLEG(rt)
				g.Relist()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					g.Relist()
				}
			})
			b.Run("all-new", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					g, events := newPLEG(rt)
					b.StartTimer()
					g.Relist()
					b.StopTimer()
					if len(events) == 0 {
						b.Fatal("a first relist sent no events")
					}
					b.StartTimer()
				}
			})
		})
	}
}

func newPLEG(rt *plegruntime.Runtime) (*pleg.GenericPLEG, chan *pleg.PodLifecycleEvent) {
	// Room for every event of 10k containers: the PLEG drops events when
	// its channel is full, which would not change the timing but is noisy.
	events := make(chan *pleg.PodLifecycleEvent, 20000)
	g := pleg.NewGenericPLEG(klog.Background(), rt, events, &pleg.RelistDuration{RelistPeriod: 1, RelistThreshold: 2},
		kubecontainer.NewCache(), clock.RealClock{}).(*pleg.GenericPLEG)
	return g, events
}

// populated starts the mock on a socket and fills it in-process (fast),
// then returns our runtime dialled over gRPC (what is measured).
func populated(b *testing.B, n int) *plegruntime.Runtime {
	b.Helper()
	dir, err := os.MkdirTemp("", "bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	srv, err := fakecri.Start(filepath.Join(dir, "cri.sock"), fakecri.WithImages("busybox"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Stop)
	ctx := context.Background()
	r := srv.Runtime()
	for i := 0; i < n/2; i++ {
		p := cri.Pod{Name: fmt.Sprintf("pod-%05d", i), Namespace: "bench", UID: fmt.Sprintf("uid-%05d", i)}
		cfg := p.SandboxConfig()
		sb, err := r.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
		if err != nil {
			b.Fatal(err)
		}
		for _, name := range []string{"app", "sidecar"} {
			cc := p.ContainerConfig(cri.Container{Name: name, Image: "busybox", Command: []string{"sh", "-c", "sleep 3600"}})
			cr, err := r.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: cc, SandboxConfig: cfg})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := r.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cr.ContainerId}); err != nil {
				b.Fatal(err)
			}
		}
	}
	c, err := cri.Dial(ctx, srv.Endpoint())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return plegruntime.New(c)
}
