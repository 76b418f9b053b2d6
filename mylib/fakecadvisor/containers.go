package fakecadvisor

import (
	"fmt"
	"strings"
	"time"

	cadvisorapi "github.com/google/cadvisor/info/v1"
	cadvisorapiv2 "github.com/google/cadvisor/info/v2"
)

// Any cgroup name the kubelet asks for exists: "/" (the node — used for
// the node's CPU/memory in /stats/summary) and the system containers
// ("/kubelet", "/system.slice", the pods root …). The kubelet's stats
// helpers (pkg/kubelet/stats/helper.go, v1.36.3) need exactly one entry
// per non-recursive request, HasCpu/HasMemory in the spec, and two
// samples to compute "instantaneous" CPU. There are no per-pod cgroups:
// a recursive request returns only the named cgroup, so the kubelet takes
// pod and container stats from the CRI (our fakecri reports them).

// ContainerInfoV2 returns stats for the named cgroup.
func (f *Fake) ContainerInfoV2(name string, options cadvisorapiv2.RequestOptions) (map[string]cadvisorapiv2.ContainerInfo, error) {
	if options.IdType != "" && options.IdType != cadvisorapiv2.TypeName {
		return nil, fmt.Errorf("fakecadvisor: unsupported id type %q (only %q)", options.IdType, cadvisorapiv2.TypeName)
	}
	name = normalizeName(name)
	info := cadvisorapiv2.ContainerInfo{Spec: f.specV2(name)}
	for _, t := range f.samples(options.Count) {
		cpuTotal, nanoCores, ws, usage, rss := f.usageAt(name, t)
		st := &cadvisorapiv2.ContainerStats{
			Timestamp: t,
			Cpu:       &cadvisorapi.CpuStats{Usage: cadvisorapi.CpuUsage{Total: cpuTotal, User: cpuTotal * 7 / 10, System: cpuTotal * 3 / 10}},
			CpuInst:   &cadvisorapiv2.CpuInstStats{Usage: cadvisorapiv2.CpuInstUsage{Total: nanoCores, User: nanoCores * 7 / 10, System: nanoCores * 3 / 10}},
			Memory:    memoryStats(ws, usage, rss, t.Sub(f.start).Seconds()),
			Processes: &cadvisorapi.ProcessStats{ProcessCount: 1 + share(name)/10},
		}
		if name == "/" {
			st.Network = &cadvisorapiv2.NetworkStats{Interfaces: []cadvisorapi.InterfaceStats{f.iface(t)}}
		}
		info.Stats = append(info.Stats, st)
	}
	return map[string]cadvisorapiv2.ContainerInfo{name: info}, nil
}

// GetRequestedContainersInfo is the v1 form of ContainerInfoV2.
func (f *Fake) GetRequestedContainersInfo(containerName string, options cadvisorapiv2.RequestOptions) (map[string]*cadvisorapi.ContainerInfo, error) {
	v2, err := f.ContainerInfoV2(containerName, options)
	if err != nil {
		return nil, err
	}
	out := map[string]*cadvisorapi.ContainerInfo{}
	for name, in := range v2 {
		ci := &cadvisorapi.ContainerInfo{
			ContainerReference: cadvisorapi.ContainerReference{Name: name},
			Spec: cadvisorapi.ContainerSpec{
				CreationTime: in.Spec.CreationTime,
				HasCpu:       true,
				Cpu:          cadvisorapi.CpuSpec{Limit: in.Spec.Cpu.Limit, MaxLimit: in.Spec.Cpu.MaxLimit},
				HasMemory:    true,
				Memory:       cadvisorapi.MemorySpec{Limit: in.Spec.Memory.Limit},
				HasNetwork:   in.Spec.HasNetwork, HasFilesystem: true,
			},
		}
		for _, s := range in.Stats {
			st := &cadvisorapi.ContainerStats{Timestamp: s.Timestamp, Cpu: *s.Cpu, Memory: *s.Memory}
			if s.Network != nil {
				st.Network = cadvisorapi.NetworkStats{InterfaceStats: s.Network.Interfaces[0], Interfaces: s.Network.Interfaces}
			}
			ci.Stats = append(ci.Stats, st)
		}
		out[name] = ci
	}
	return out, nil
}

func normalizeName(name string) string {
	if name == "" {
		return "/"
	}
	if !strings.HasPrefix(name, "/") {
		name = "/" + name
	}
	return name
}

func (f *Fake) specV2(name string) cadvisorapiv2.ContainerSpec {
	return cadvisorapiv2.ContainerSpec{
		CreationTime: f.start,
		HasCpu:       true,
		Cpu:          cadvisorapiv2.CpuSpec{Limit: 1024 * uint64(f.m.NumCores), MaxLimit: 0},
		HasMemory:    true,
		// Every cgroup is bounded by the machine, which makes the kubelet
		// report availableBytes = capacity - working set for the node.
		Memory:        cadvisorapiv2.MemorySpec{Limit: f.m.MemoryBytes},
		HasNetwork:    name == "/",
		HasFilesystem: true,
		HasProcesses:  true,
	}
}

func memoryStats(ws, usage, rss uint64, ageSeconds float64) *cadvisorapi.MemoryStats {
	m := &cadvisorapi.MemoryStats{
		Usage:      usage,
		MaxUsage:   usage + usage/10,
		Cache:      usage - ws,
		RSS:        rss,
		WorkingSet: ws,
	}
	m.ContainerData.Pgfault = uint64(max(ageSeconds, 0) * 1000)
	m.HierarchicalData = m.ContainerData
	return m
}

// iface is the node's network interface; counters grow ~10 KB/s in, 5 out.
func (f *Fake) iface(t time.Time) cadvisorapi.InterfaceStats {
	s := uint64(max(t.Sub(f.start), 0) / time.Millisecond)
	return cadvisorapi.InterfaceStats{
		Name: "eth0", RxBytes: s * 10, RxPackets: s / 100, TxBytes: s * 5, TxPackets: s / 200,
	}
}
