// Package fakecadvisor is a compact fake of the kubelet's cAdvisor
// interface (k8s.io/kubernetes/pkg/kubelet/cadvisor.Interface, v1.36.3)
// for a node that has no real machine behind it.
//
// Compared with upstream's pkg/kubelet/cadvisor/testing.Fake (1 core,
// 3.75 GB, empty stats — so /stats/summary fails), this fake has a
// configurable machine and answers every stats call with plausible,
// steadily growing numbers: the kubelet's node capacity, node status and
// its summary API (root cgroup CPU/memory, filesystems) all work. Knobs
// (SetMemoryWorkingSet, SetDiskUsedBytes) let a lab push the node into
// MemoryPressure or DiskPressure.
//
// Usage numbers come from the wall clock and the Machine, never from the
// host, so the fake behaves the same on a laptop and in CI.
package fakecadvisor

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	cadvisorapi "github.com/google/cadvisor/info/v1"
	cadvisorapiv2 "github.com/google/cadvisor/info/v2"
)

// Machine describes the fake node. Zero fields take the defaults shown.
type Machine struct {
	NumCores    int    // 4
	MemoryBytes uint64 // 8 GiB
	// MaxPods is not something cAdvisor reports — the kubelet reads it
	// from its config (maxPods) — but it belongs to the node's shape, so
	// one Machine value can describe the whole fake node. Default 110.
	MaxPods       int
	DiskBytes     uint64 // 100 GiB: root, image and container filesystem (one disk)
	RootDir       string // the kubelet root dir, reported as a mount point; "/var/lib/kubelet"
	NodeName      string // becomes InstanceID; seeds MachineID, SystemUUID, BootID
	KernelVersion string // "6.1.0-fake"
	OSImage       string // "kubelet-labs fake node"
}

func (m Machine) withDefaults() Machine {
	if m.NumCores <= 0 {
		m.NumCores = 4
	}
	if m.MemoryBytes == 0 {
		m.MemoryBytes = 8 << 30
	}
	if m.MaxPods <= 0 {
		m.MaxPods = 110
	}
	if m.DiskBytes == 0 {
		m.DiskBytes = 100 << 30
	}
	if m.RootDir == "" {
		m.RootDir = "/var/lib/kubelet"
	}
	if m.NodeName == "" {
		m.NodeName = "fake-node"
	}
	if m.KernelVersion == "" {
		m.KernelVersion = "6.1.0-fake"
	}
	if m.OSImage == "" {
		m.OSImage = "kubelet-labs fake node"
	}
	return m
}

// Fake implements the kubelet's cadvisor.Interface. It is safe for
// concurrent use.
type Fake struct {
	m     Machine
	start time.Time
	now   func() time.Time

	mu         sync.Mutex
	started    bool
	workingSet uint64 // root cgroup working set
	diskUsed   uint64
}

// New returns a fake for machine m (zero fields defaulted). The node
// starts at 15 % memory and 20 % disk use.
func New(m Machine) *Fake {
	m = m.withDefaults()
	return &Fake{
		m:          m,
		start:      time.Now(),
		now:        time.Now,
		workingSet: m.MemoryBytes * 15 / 100,
		diskUsed:   m.DiskBytes / 5,
	}
}

// Machine returns the machine with defaults filled in.
func (f *Fake) Machine() Machine { return f.m }

// SetMemoryWorkingSet sets the root cgroup's working set, which the
// kubelet's eviction manager compares with memory.available thresholds.
func (f *Fake) SetMemoryWorkingSet(bytes uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.workingSet = min(bytes, f.m.MemoryBytes)
}

// SetDiskUsedBytes sets the used bytes of the (single) disk.
func (f *Fake) SetDiskUsedBytes(bytes uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.diskUsed = min(bytes, f.m.DiskBytes)
}

// Start is a no-op; it may be called more than once.
func (f *Fake) Start() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = true
	return nil
}

// ids derives stable machine identifiers from the node name, so a node
// keeps its MachineID across restarts (the kubelet reports it in
// Node.status.nodeInfo).
func (f *Fake) ids() (machineID, systemUUID, bootID string) {
	h := sha256.Sum256([]byte("fakecadvisor/" + f.m.NodeName))
	b := sha256.Sum256([]byte(fmt.Sprintf("boot/%s/%d", f.m.NodeName, f.start.UnixNano())))
	uuid := func(x []byte) string {
		return fmt.Sprintf("%x-%x-%x-%x-%x", x[0:4], x[4:6], x[6:8], x[8:10], x[10:16])
	}
	return fmt.Sprintf("%x", h[:16]), uuid(h[16:32]), uuid(b[:16])
}

// MachineInfo describes the machine: cores (one socket, one NUMA node),
// memory and the disk. A fresh copy every call.
func (f *Fake) MachineInfo() (*cadvisorapi.MachineInfo, error) {
	machineID, systemUUID, bootID := f.ids()
	cores := make([]cadvisorapi.Core, f.m.NumCores)
	for i := range cores {
		cores[i] = cadvisorapi.Core{Id: i, Threads: []int{i}, SocketID: 0}
	}
	inodes := f.m.DiskBytes / (16 << 10)
	return &cadvisorapi.MachineInfo{
		Timestamp:        f.now(),
		CPUVendorID:      "FakeCPU",
		NumCores:         f.m.NumCores,
		NumPhysicalCores: f.m.NumCores,
		NumSockets:       1,
		CpuFrequency:     2_400_000, // kHz
		MemoryCapacity:   f.m.MemoryBytes,
		MachineID:        machineID,
		SystemUUID:       systemUUID,
		BootID:           bootID,
		Filesystems: []cadvisorapi.FsInfo{{
			Device: fakeDevice, Capacity: f.m.DiskBytes, Type: "ext4", Inodes: inodes, HasInodes: true,
		}},
		Topology:      []cadvisorapi.Node{{Id: 0, Memory: f.m.MemoryBytes, Cores: cores}},
		CloudProvider: cadvisorapi.UnknownProvider,
		InstanceType:  cadvisorapi.UnknownInstance,
		InstanceID:    cadvisorapi.InstanceID(f.m.NodeName),
	}, nil
}

// VersionInfo reports the kernel and OS the node status shows.
func (f *Fake) VersionInfo() (*cadvisorapi.VersionInfo, error) {
	return &cadvisorapi.VersionInfo{
		KernelVersion:      f.m.KernelVersion,
		ContainerOsVersion: f.m.OSImage,
		CadvisorVersion:    "v0.56.2-fake",
	}, nil
}

const fakeDevice = "/dev/fakedisk0"

// fsInfo is the single disk that holds root, images and containers.
func (f *Fake) fsInfo(mountpoint string) cadvisorapiv2.FsInfo {
	f.mu.Lock()
	used := f.diskUsed
	f.mu.Unlock()
	inodes := f.m.DiskBytes / (16 << 10)
	inodesFree := inodes - inodes*used/f.m.DiskBytes/2 // files average 32 KiB
	return cadvisorapiv2.FsInfo{
		Timestamp:  f.now(),
		Device:     fakeDevice,
		Mountpoint: mountpoint,
		Capacity:   f.m.DiskBytes,
		Available:  f.m.DiskBytes - used,
		Usage:      used,
		Inodes:     &inodes,
		InodesFree: &inodesFree,
	}
}

// ImagesFsInfo reports the image filesystem (the same disk as root).
func (f *Fake) ImagesFsInfo(context.Context) (cadvisorapiv2.FsInfo, error) {
	return f.fsInfo("/"), nil
}

// RootFsInfo reports the root filesystem.
func (f *Fake) RootFsInfo() (cadvisorapiv2.FsInfo, error) { return f.fsInfo("/"), nil }

// ContainerFsInfo reports the containers' writable-layer filesystem.
func (f *Fake) ContainerFsInfo(context.Context) (cadvisorapiv2.FsInfo, error) {
	return f.fsInfo("/"), nil
}

// GetDirFsInfo reports the filesystem holding path: always our one disk.
func (f *Fake) GetDirFsInfo(path string) (cadvisorapiv2.FsInfo, error) {
	if path == "" {
		return cadvisorapiv2.FsInfo{}, fmt.Errorf("fakecadvisor: empty path")
	}
	return f.fsInfo("/"), nil
}

// share is the fraction (in 1/1000) of the machine a cgroup uses: the
// root cgroup is the whole node; any other name gets a stable 1–5 %.
func share(name string) uint64 {
	if name == "/" || name == "" {
		return 1000
	}
	h := sha256.Sum256([]byte(name))
	return 10 + binary.BigEndian.Uint64(h[:8])%41
}

// usageAt returns cumulative CPU (core-ns), instantaneous CPU (nanocores)
// and memory (working set, usage, rss) of a cgroup at time t.
func (f *Fake) usageAt(name string, t time.Time) (cpuTotal, nanoCores, ws, usage, rss uint64) {
	s := share(name)
	// The node idles at 10 % of its cores.
	nanoCores = uint64(f.m.NumCores) * 1e9 / 10 * s / 1000
	up := uint64(max(t.Sub(f.start), 0))
	cpuTotal = up / 1e9 * nanoCores
	f.mu.Lock()
	rootWS := f.workingSet
	f.mu.Unlock()
	ws = rootWS * s / 1000
	usage = ws + ws/4 // plus reclaimable page cache
	rss = ws * 3 / 4
	return
}

// samples returns n timestamps 10 s apart, oldest first, ending now.
func (f *Fake) samples(n int) []time.Time {
	if n <= 0 || n > 60 {
		n = 2 // the kubelet asks for 2 to compute an instantaneous rate
	}
	now := f.now()
	ts := make([]time.Time, n)
	for i := range ts {
		ts[i] = now.Add(-time.Duration(n-1-i) * 10 * time.Second)
	}
	return ts
}
