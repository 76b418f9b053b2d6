package fakecri

import (
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeClock is a settable clock for WithClock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestContainerStatsArePlausible(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	r := newRuntime(t, WithClock(clk.now))
	sb := runPod(t, r, podConfig("s"))
	cfg := ctrConfig("c")
	cfg.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 512 << 20}}
	id := createStart(t, r, sb, cfg)

	stats := func() *runtimeapi.ContainerStats {
		resp, err := r.ContainerStats(tctx(t), &runtimeapi.ContainerStatsRequest{ContainerId: id})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Stats
	}
	clk.step(10 * time.Second)
	s1 := stats()
	if s1.Attributes.Id != id || s1.Attributes.Metadata.Name != "c" {
		t.Fatalf("attributes %v", s1.Attributes)
	}
	nano := s1.Cpu.UsageNanoCores.Value
	if nano < 5e6 || nano > 55e6 {
		t.Fatalf("usage %d nanocores, want 5-55 millicores", nano)
	}
	// Cumulative CPU = rate × uptime.
	if got, want := s1.Cpu.UsageCoreNanoSeconds.Value, nano*10; got != want {
		t.Fatalf("cumulative CPU %d, want %d", got, want)
	}
	ws := s1.Memory.WorkingSetBytes.Value
	if ws < 8<<20 || ws > 72<<20 || s1.Memory.AvailableBytes.Value != 512<<20-ws {
		t.Fatalf("working set %d available %d", ws, s1.Memory.AvailableBytes.GetValue())
	}
	if s1.WritableLayer.UsedBytes.Value == 0 || s1.Cpu.Timestamp != clk.now().UnixNano() {
		t.Fatalf("writable layer / timestamp: %v", s1)
	}
	clk.step(10 * time.Second)
	if s2 := stats(); s2.Cpu.UsageCoreNanoSeconds.Value <= s1.Cpu.UsageCoreNanoSeconds.Value {
		t.Fatal("cumulative CPU did not grow")
	}
	if _, err := r.StopContainer(tctx(t), &runtimeapi.StopContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	frozen := stats().Cpu.UsageCoreNanoSeconds.Value
	clk.step(time.Minute)
	s3 := stats()
	if s3.Cpu.UsageCoreNanoSeconds.Value != frozen || s3.Memory.WorkingSetBytes.Value != 0 || s3.Cpu.UsageNanoCores.Value != 0 {
		t.Fatalf("stopped container still uses resources: %v", s3)
	}
}

func TestSandboxStatsSumContainers(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	r := newRuntime(t, WithClock(clk.now))
	sb := runPod(t, r, podConfig("s"))
	a := createStart(t, r, sb, ctrConfig("a"))
	b := createStart(t, r, sb, ctrConfig("b"))
	other := runPod(t, r, podConfig("o"))
	createStart(t, r, other, ctrConfig("x"))
	clk.step(30 * time.Second)

	resp, err := r.PodSandboxStats(tctx(t), &runtimeapi.PodSandboxStatsRequest{PodSandboxId: sb})
	if err != nil {
		t.Fatal(err)
	}
	l := resp.Stats.Linux
	if len(l.Containers) != 2 || l.Containers[0].Attributes.Id != a || l.Containers[1].Attributes.Id != b {
		t.Fatalf("containers %v", l.Containers)
	}
	sum := l.Containers[0].Cpu.UsageNanoCores.Value + l.Containers[1].Cpu.UsageNanoCores.Value
	if l.Cpu.UsageNanoCores.Value != sum {
		t.Fatalf("pod CPU %d != sum %d", l.Cpu.UsageNanoCores.Value, sum)
	}
	ws := l.Containers[0].Memory.WorkingSetBytes.Value + l.Containers[1].Memory.WorkingSetBytes.Value
	if l.Memory.WorkingSetBytes.Value <= ws {
		t.Fatal("pod memory should include the pause process")
	}
	if l.Process.ProcessCount.Value != 3 || l.Network.DefaultInterface.RxBytes.Value == 0 {
		t.Fatalf("process count %d, rx %d", l.Process.ProcessCount.Value, l.Network.DefaultInterface.RxBytes.Value)
	}
	if resp.Stats.Attributes.Metadata.Uid != "uid-s" {
		t.Fatalf("attributes %v", resp.Stats.Attributes)
	}

	all, err := r.ListPodSandboxStats(tctx(t), &runtimeapi.ListPodSandboxStatsRequest{})
	if err != nil || len(all.Stats) != 2 {
		t.Fatalf("list: %d %v", len(all.GetStats()), err)
	}
	byLabel, _ := r.ListPodSandboxStats(tctx(t), &runtimeapi.ListPodSandboxStatsRequest{Filter: &runtimeapi.PodSandboxStatsFilter{LabelSelector: map[string]string{"app": "o"}}})
	if len(byLabel.Stats) != 1 || byLabel.Stats[0].Attributes.Id != other {
		t.Fatalf("label filter: %v", byLabel.Stats)
	}
	cs, _ := r.ListContainerStats(tctx(t), &runtimeapi.ListContainerStatsRequest{Filter: &runtimeapi.ContainerStatsFilter{PodSandboxId: sb}})
	if len(cs.Stats) != 2 {
		t.Fatalf("container stats by sandbox: %d", len(cs.Stats))
	}
	cs, _ = r.ListContainerStats(tctx(t), &runtimeapi.ListContainerStatsRequest{Filter: &runtimeapi.ContainerStatsFilter{Id: b[:6]}})
	if len(cs.Stats) != 1 || cs.Stats[0].Attributes.Id != b {
		t.Fatalf("container stats by id prefix: %v", cs.Stats)
	}
}
