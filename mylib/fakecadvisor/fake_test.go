package fakecadvisor

import (
	"context"
	"sync"
	"testing"
	"time"

	cadvisorapiv2 "github.com/google/cadvisor/info/v2"
	"k8s.io/kubernetes/pkg/kubelet/cadvisor"
)

// The kubelet accepts it: this is the interface kubelet.Dependencies takes.
var _ cadvisor.Interface = (*Fake)(nil)

func TestMachineDefaultsAndOverrides(t *testing.T) {
	f := New(Machine{})
	mi, err := f.MachineInfo()
	if err != nil {
		t.Fatal(err)
	}
	if mi.NumCores != 4 || mi.MemoryCapacity != 8<<30 || f.Machine().MaxPods != 110 || mi.MachineID == "" || mi.SystemUUID == "" || mi.BootID == "" {
		t.Fatalf("defaults: %+v", mi)
	}
	if len(mi.Topology) != 1 || len(mi.Topology[0].Cores) != 4 || mi.Filesystems[0].Capacity != 100<<30 {
		t.Fatalf("topology/filesystems: %+v", mi)
	}

	f = New(Machine{NumCores: 16, MemoryBytes: 64 << 30, MaxPods: 250, NodeName: "n1", KernelVersion: "6.6.0", OSImage: "Lab OS"})
	mi, _ = f.MachineInfo()
	if mi.NumCores != 16 || mi.MemoryCapacity != 64<<30 || string(mi.InstanceID) != "n1" || f.Machine().MaxPods != 250 {
		t.Fatalf("overrides: %+v", mi)
	}
	other, _ := New(Machine{NodeName: "n1"}).MachineInfo()
	if other.MachineID != mi.MachineID {
		t.Fatal("MachineID must be stable for a node name")
	}
	if other.BootID == mi.BootID {
		t.Fatal("BootID must change with every New (a reboot)")
	}
	mi.Topology[0].Cores[0].Id = 99 // callers get copies
	if again, _ := f.MachineInfo(); again.Topology[0].Cores[0].Id != 0 {
		t.Fatal("MachineInfo shares state with callers")
	}
	v, _ := f.VersionInfo()
	if v.KernelVersion != "6.6.0" || v.ContainerOsVersion != "Lab OS" {
		t.Fatalf("version %+v", v)
	}
	if f.Start() != nil || f.Start() != nil {
		t.Fatal("Start must be repeatable")
	}
}

func TestContainerInfoV2AsTheKubeletAsks(t *testing.T) {
	f := New(Machine{NumCores: 8, MemoryBytes: 16 << 30})
	now := time.Now()
	var mu sync.Mutex
	f.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	now = now.Add(time.Hour)
	// What pkg/kubelet/stats/helper.go getCgroupInfo sends.
	for _, name := range []string{"/", "/kubelet", "/system.slice", "kubepods"} {
		infos, err := f.ContainerInfoV2(name, cadvisorapiv2.RequestOptions{IdType: cadvisorapiv2.TypeName, Count: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) != 1 {
			t.Fatalf("%s: %d entries, the kubelet wants exactly 1", name, len(infos))
		}
		info, ok := infos[normalizeName(name)]
		if !ok || !info.Spec.HasCpu || !info.Spec.HasMemory || len(info.Stats) != 2 {
			t.Fatalf("%s: %+v", name, info)
		}
		s0, s1 := info.Stats[0], info.Stats[1]
		if !s0.Timestamp.Before(s1.Timestamp) || s1.Cpu.Usage.Total <= s0.Cpu.Usage.Total || s1.CpuInst.Usage.Total == 0 {
			t.Fatalf("%s: samples not increasing: %+v %+v", name, s0.Cpu, s1.Cpu)
		}
		if s1.Memory.WorkingSet == 0 || s1.Memory.WorkingSet > info.Spec.Memory.Limit || s1.Memory.Usage < s1.Memory.WorkingSet {
			t.Fatalf("%s: memory %+v limit %d", name, s1.Memory, info.Spec.Memory.Limit)
		}
	}
	root, _ := f.ContainerInfoV2("/", cadvisorapiv2.RequestOptions{Count: 1})
	r := root["/"].Stats[0]
	// The node idles at 10 % of its 8 cores, and 15 % of memory.
	if r.CpuInst.Usage.Total != 8e8 || r.Memory.WorkingSet != (16<<30)*15/100 || r.Network == nil {
		t.Fatalf("root: cpu %d ws %d net %v", r.CpuInst.Usage.Total, r.Memory.WorkingSet, r.Network)
	}
	if _, err := f.ContainerInfoV2("/", cadvisorapiv2.RequestOptions{IdType: cadvisorapiv2.TypeDocker}); err == nil {
		t.Fatal("docker id type accepted")
	}
	v1, err := f.GetRequestedContainersInfo("/", cadvisorapiv2.RequestOptions{Count: 2})
	if err != nil || len(v1["/"].Stats) != 2 || v1["/"].Stats[1].Network.RxBytes == 0 {
		t.Fatalf("v1 info: %+v %v", v1, err)
	}
}

func TestFilesystemsAndPressureKnobs(t *testing.T) {
	f := New(Machine{DiskBytes: 10 << 30, MemoryBytes: 4 << 30})
	ctx := context.Background()
	for name, get := range map[string]func() (cadvisorapiv2.FsInfo, error){
		"root":      f.RootFsInfo,
		"images":    func() (cadvisorapiv2.FsInfo, error) { return f.ImagesFsInfo(ctx) },
		"container": func() (cadvisorapiv2.FsInfo, error) { return f.ContainerFsInfo(ctx) },
		"dir":       func() (cadvisorapiv2.FsInfo, error) { return f.GetDirFsInfo("/var/lib/kubelet/pods") },
	} {
		fs, err := get()
		if err != nil || fs.Capacity != 10<<30 || fs.Usage+fs.Available != fs.Capacity || fs.Inodes == nil || *fs.InodesFree > *fs.Inodes {
			t.Fatalf("%s: %+v %v", name, fs, err)
		}
	}
	if _, err := f.GetDirFsInfo(""); err == nil {
		t.Fatal("empty path accepted")
	}
	f.SetDiskUsedBytes(9800 << 20)
	if fs, _ := f.RootFsInfo(); fs.Available != 10<<30-9800<<20 {
		t.Fatalf("disk knob: available %d", fs.Available)
	}
	f.SetDiskUsedBytes(1 << 40) // clamped to the disk
	if fs, _ := f.RootFsInfo(); fs.Available != 0 || fs.Usage != fs.Capacity {
		t.Fatalf("clamp: %+v", fs)
	}
	f.SetMemoryWorkingSet(3900 << 20)
	root, _ := f.ContainerInfoV2("/", cadvisorapiv2.RequestOptions{Count: 1})
	if ws := root["/"].Stats[0].Memory.WorkingSet; ws != 3900<<20 {
		t.Fatalf("memory knob: %d", ws)
	}
}

func TestConcurrentUse(t *testing.T) {
	f := New(Machine{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				f.SetMemoryWorkingSet(uint64(i) << 20)
				f.ContainerInfoV2("/", cadvisorapiv2.RequestOptions{Count: 2})
				f.RootFsInfo()
				f.MachineInfo()
			}
		}()
	}
	wg.Wait()
}
