package fakecri

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"maps"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Stats are made up but plausible and consistent: each container gets a
// steady CPU rate (5–55 millicores) and working set (8–72 MiB) derived
// from its ID, cumulative counters grow with its uptime, a stopped
// container's counters freeze and its memory drops to zero, and a pod's
// numbers are the sum of its containers plus a small pause overhead.

type statSeed struct {
	milliCores uint64 // CPU rate while running
	workingSet uint64 // bytes while running
	writable   uint64 // bytes in the writable layer
}

func seedFor(id string) statSeed {
	h := sha256.Sum256([]byte(id))
	return statSeed{
		milliCores: 5 + binary.BigEndian.Uint64(h[0:8])%50,
		workingSet: (8 + binary.BigEndian.Uint64(h[8:16])%64) << 20,
		writable:   (4 + binary.BigEndian.Uint64(h[16:24])%1020) << 10,
	}
}

func u64(v uint64) *runtimeapi.UInt64Value { return &runtimeapi.UInt64Value{Value: v} }

// containerStats computes c's stats at time now. Caller holds r.mu.
func (c *container) stats(now int64) *runtimeapi.ContainerStats {
	seed := seedFor(c.id)
	running := c.state == runtimeapi.ContainerState_CONTAINER_RUNNING
	var uptime int64
	switch c.state {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		uptime = now - c.startedAt
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		uptime = c.finishedAt - c.startedAt
	}
	uptime = max(uptime, 0)
	cpuTotal := uint64(uptime) / 1000 * seed.milliCores // ns·(m/1000) = core-ns
	st := &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{
			Id:          c.id,
			Metadata:    c.metadata(),
			Labels:      maps.Clone(c.config.GetLabels()),
			Annotations: maps.Clone(c.config.GetAnnotations()),
		},
		Cpu: &runtimeapi.CpuUsage{Timestamp: now, UsageCoreNanoSeconds: u64(cpuTotal), UsageNanoCores: u64(0)},
		Memory: &runtimeapi.MemoryUsage{
			Timestamp:       now,
			WorkingSetBytes: u64(0),
			UsageBytes:      u64(0),
			RssBytes:        u64(0),
			PageFaults:      u64(uint64(uptime) / 1e6), // ~1000 per second of life
			MajorPageFaults: u64(0),
		},
		WritableLayer: &runtimeapi.FilesystemUsage{
			Timestamp:  now,
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: imageFSMountpoint},
			UsedBytes:  u64(seed.writable),
			InodesUsed: u64(seed.writable >> 12),
		},
		Swap: &runtimeapi.SwapUsage{Timestamp: now, SwapUsageBytes: u64(0)},
	}
	if running {
		st.Cpu.UsageNanoCores = u64(seed.milliCores * 1e6)
		st.Memory.WorkingSetBytes = u64(seed.workingSet)
		st.Memory.UsageBytes = u64(seed.workingSet + seed.workingSet/8) // plus page cache
		st.Memory.RssBytes = u64(seed.workingSet * 3 / 4)
	}
	if limit := c.resources.GetLinux().GetMemoryLimitInBytes(); limit > 0 {
		avail := uint64(limit) - min(uint64(limit), st.Memory.WorkingSetBytes.Value)
		st.Memory.AvailableBytes = u64(avail)
		st.Swap.SwapAvailableBytes = u64(0)
	}
	return st
}

// sandboxStats sums the containers and adds the pause process and a
// network interface whose counters grow with the sandbox's age.
func (sb *sandbox) stats(now int64) *runtimeapi.PodSandboxStats {
	ready := sb.state == runtimeapi.PodSandboxState_SANDBOX_READY
	var cpuTotal, nanoCores, ws, usage, rss uint64
	var procs uint64
	cs := make([]*container, 0, len(sb.containers))
	for _, c := range sb.containers {
		cs = append(cs, c)
	}
	sortContainers(cs)
	cstats := make([]*runtimeapi.ContainerStats, 0, len(cs))
	for _, c := range cs {
		s := c.stats(now)
		cstats = append(cstats, s)
		cpuTotal += s.Cpu.UsageCoreNanoSeconds.GetValue()
		nanoCores += s.Cpu.UsageNanoCores.GetValue()
		ws += s.Memory.WorkingSetBytes.GetValue()
		usage += s.Memory.UsageBytes.GetValue()
		rss += s.Memory.RssBytes.GetValue()
		if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
			procs++
		}
	}
	age := uint64(max(now-sb.createdAt, 0))
	if ready {
		procs++ // pause
		ws += 512 << 10
		usage += 512 << 10
		rss += 384 << 10
	}
	iface := &runtimeapi.NetworkInterfaceUsage{
		Name:     "eth0",
		RxBytes:  u64(age / 1e6 * 2), // ~2 KB/s in
		RxErrors: u64(0),
		TxBytes:  u64(age / 1e6), // ~1 KB/s out
		TxErrors: u64(0),
	}
	return &runtimeapi.PodSandboxStats{
		Attributes: &runtimeapi.PodSandboxAttributes{
			Id:          sb.id,
			Metadata:    sb.metadata(),
			Labels:      maps.Clone(sb.config.GetLabels()),
			Annotations: maps.Clone(sb.config.GetAnnotations()),
		},
		Linux: &runtimeapi.LinuxPodSandboxStats{
			Cpu: &runtimeapi.CpuUsage{Timestamp: now, UsageCoreNanoSeconds: u64(cpuTotal), UsageNanoCores: u64(nanoCores)},
			Memory: &runtimeapi.MemoryUsage{
				Timestamp: now, WorkingSetBytes: u64(ws), UsageBytes: u64(usage), RssBytes: u64(rss),
				PageFaults: u64(age / 1e6), MajorPageFaults: u64(0),
			},
			Network:    &runtimeapi.NetworkUsage{Timestamp: now, DefaultInterface: iface, Interfaces: []*runtimeapi.NetworkInterfaceUsage{iface}},
			Process:    &runtimeapi.ProcessUsage{Timestamp: now, ProcessCount: u64(procs)},
			Containers: cstats,
			Io:         &runtimeapi.IoUsage{Timestamp: now},
		},
	}
}

// ContainerStats returns one container's stats.
func (r *Runtime) ContainerStats(_ context.Context, req *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	id, err := resolveID(r.containers, "container", req.GetContainerId())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ContainerStatsResponse{Stats: r.containers[id].stats(r.nowNano())}, nil
}

// ListContainerStats returns stats of the containers matching the filter.
func (r *Runtime) ListContainerStats(_ context.Context, req *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	return &runtimeapi.ListContainerStatsResponse{Stats: r.listContainerStats(req.GetFilter())}, nil
}

// StreamContainerStats is ListContainerStats in chunks (KEP-5825).
func (r *Runtime) StreamContainerStats(req *runtimeapi.StreamContainerStatsRequest, stream grpc.ServerStreamingServer[runtimeapi.StreamContainerStatsResponse]) error {
	return sendChunks(r.listContainerStats(req.GetFilter()), func(c []*runtimeapi.ContainerStats) error {
		return stream.Send(&runtimeapi.StreamContainerStatsResponse{ContainerStats: c})
	})
}

func (r *Runtime) listContainerStats(f *runtimeapi.ContainerStatsFilter) []*runtimeapi.ContainerStats {
	r.mu.RLock()
	defer r.mu.RUnlock()
	now := r.nowNano()
	cs := r.filterContainers(f.GetId(), f.GetPodSandboxId(), f.GetLabelSelector())
	out := make([]*runtimeapi.ContainerStats, len(cs))
	for i, c := range cs {
		out[i] = c.stats(now)
	}
	return out
}

// PodSandboxStats returns one sandbox's stats.
func (r *Runtime) PodSandboxStats(_ context.Context, req *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	id, err := resolveID(r.sandboxes, "pod sandbox", req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.PodSandboxStatsResponse{Stats: r.sandboxes[id].stats(r.nowNano())}, nil
}

// ListPodSandboxStats returns stats of the sandboxes matching the filter.
func (r *Runtime) ListPodSandboxStats(_ context.Context, req *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	return &runtimeapi.ListPodSandboxStatsResponse{Stats: r.listSandboxStats(req.GetFilter())}, nil
}

// StreamPodSandboxStats is ListPodSandboxStats in chunks (KEP-5825).
func (r *Runtime) StreamPodSandboxStats(req *runtimeapi.StreamPodSandboxStatsRequest, stream grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxStatsResponse]) error {
	return sendChunks(r.listSandboxStats(req.GetFilter()), func(c []*runtimeapi.PodSandboxStats) error {
		return stream.Send(&runtimeapi.StreamPodSandboxStatsResponse{PodSandboxStats: c})
	})
}

func (r *Runtime) listSandboxStats(f *runtimeapi.PodSandboxStatsFilter) []*runtimeapi.PodSandboxStats {
	sbs := r.listSandboxes(&runtimeapi.PodSandboxFilter{Id: f.GetId(), LabelSelector: f.GetLabelSelector()})
	r.mu.RLock()
	defer r.mu.RUnlock()
	now := r.nowNano()
	out := make([]*runtimeapi.PodSandboxStats, 0, len(sbs))
	for _, item := range sbs {
		if sb, ok := r.sandboxes[item.Id]; ok { // may have gone between the two locks
			out = append(out, sb.stats(now))
		}
	}
	return out
}

// ListMetricDescriptors: the mock exposes no extra metrics; an empty list
// is the correct answer for such a runtime (the kubelet then falls back
// to its cAdvisor metrics).
func (r *Runtime) ListMetricDescriptors(context.Context, *runtimeapi.ListMetricDescriptorsRequest) (*runtimeapi.ListMetricDescriptorsResponse, error) {
	return &runtimeapi.ListMetricDescriptorsResponse{}, nil
}

// ListPodSandboxMetrics: see ListMetricDescriptors.
func (r *Runtime) ListPodSandboxMetrics(context.Context, *runtimeapi.ListPodSandboxMetricsRequest) (*runtimeapi.ListPodSandboxMetricsResponse, error) {
	return &runtimeapi.ListPodSandboxMetricsResponse{}, nil
}

// StreamPodSandboxMetrics sends nothing: there are no metrics.
func (r *Runtime) StreamPodSandboxMetrics(*runtimeapi.StreamPodSandboxMetricsRequest, grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxMetricsResponse]) error {
	return nil
}
