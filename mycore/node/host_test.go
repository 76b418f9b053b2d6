package node

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/mycore/cri"
	"kubelet-labs/mylib/fakecri"
)

// aHost is a machine as cAdvisor would find it, as root on x86: the DMI
// product UUID readable.
func aHost() fstest.MapFS {
	return fstest.MapFS{
		"etc/os-release":                 {Data: []byte("NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\n")},
		"usr/lib/os-release":             {Data: []byte("PRETTY_NAME=\"not this one\"\n")},
		"etc/machine-id":                 {Data: []byte("0123456789abcdef0123456789abcdef\n")},
		"var/lib/dbus/machine-id":        {Data: []byte("dbusdbusdbusdbusdbusdbusdbusdbus\n")},
		"proc/sys/kernel/random/boot_id": {Data: []byte("5c0ffee0-0000-4000-8000-000000000001\n")},
		"sys/class/dmi/id/product_uuid":  {Data: []byte("EC2A1B2C-0000-1111-2222-333344445555\n")},
	}
}

func kernel(s string) func() (string, error) { return func() (string, error) { return s, nil } }

// TestReadHostAsCAdvisor: each fact from the file cAdvisor reads it from,
// trimmed; the fallbacks where the first file is missing or unreadable.
func TestReadHostAsCAdvisor(t *testing.T) {
	got := ReadHost(aHost(), kernel("6.1.0-28-amd64"))
	want := Host{OSImage: "Debian GNU/Linux 12 (bookworm)", KernelVersion: "6.1.0-28-amd64",
		MachineID: "0123456789abcdef0123456789abcdef", SystemUUID: "EC2A1B2C-0000-1111-2222-333344445555",
		BootID: "5c0ffee0-0000-4000-8000-000000000001"}
	if got != want {
		t.Errorf("ReadHost:\n got %+v\nwant %+v", got, want)
	}

	// Not root: product_uuid is mode 0400, so cAdvisor's chain ends at
	// /etc/machine-id; no /etc/machine-id: dbus's; no /etc/os-release:
	// /usr/lib's (a stateless system).
	m := aHost()
	delete(m, "etc/os-release")
	delete(m, "etc/machine-id")
	got = ReadHost(denied{m, "sys/class/dmi/id/product_uuid"}, kernel("6.1.0"))
	if got.OSImage != "not this one" || got.MachineID != "dbusdbusdbusdbusdbusdbusdbusdbus" || got.SystemUUID != "" {
		t.Errorf("fallbacks: %+v", got)
	}
	m = aHost()
	got = ReadHost(denied{m, "sys/class/dmi/id/product_uuid"}, kernel("6.1.0"))
	if got.SystemUUID != "0123456789abcdef0123456789abcdef" {
		t.Errorf("product_uuid unreadable: SystemUUID %q, want the machine ID (cAdvisor's last fallback)", got.SystemUUID)
	}
	// An /etc/os-release that exists but cannot be read is not replaced
	// by /usr/lib's: Unknown, as cAdvisor; one without PRETTY_NAME: Linux.
	if got := ReadHost(denied{aHost(), "etc/os-release"}, kernel("x")); got.OSImage != "Unknown" {
		t.Errorf("unreadable os-release: OSImage %q, want Unknown", got.OSImage)
	}
	m = aHost()
	m["etc/os-release"] = &fstest.MapFile{Data: []byte("NAME=Plain\n")}
	if got := ReadHost(m, kernel("x")); got.OSImage != "Linux" {
		t.Errorf("no PRETTY_NAME: OSImage %q, want Linux", got.OSImage)
	}
	// Nothing at all: Unknown and empty, never a panic.
	got = ReadHost(fstest.MapFS{}, func() (string, error) { return "", errors.New("no uname") })
	if got != (Host{OSImage: "Unknown", KernelVersion: "Unknown"}) {
		t.Errorf("empty machine: %+v", got)
	}
}

// denied is a file system where one file exists but cannot be read, like
// product_uuid for anyone but root.
type denied struct {
	fs.FS
	name string
}

func (d denied) Open(name string) (fs.File, error) {
	if name == d.name {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
	}
	return d.FS.Open(name)
}

// TestSetStatusTellsTheTruth: the node's nodeInfo is its machine's and its
// runtime's, as the kubelet's MachineInfo and VersionInfo setters write
// them — not a made-up OS image and an empty runtime.
func TestSetStatusTellsTheTruth(t *testing.T) {
	h := ReadHost(aHost(), kernel("6.1.0-28-amd64"))
	n := Config{Name: "n1", Host: &h, ContainerRuntimeVersion: "containerd://2.2.9"}.InitialNode(time.Now())
	got := n.Status.NodeInfo
	want := v1.NodeSystemInfo{
		MachineID: "0123456789abcdef0123456789abcdef", SystemUUID: "EC2A1B2C-0000-1111-2222-333344445555",
		BootID: "5c0ffee0-0000-4000-8000-000000000001", KernelVersion: "6.1.0-28-amd64",
		OSImage: "Debian GNU/Linux 12 (bookworm)", ContainerRuntimeVersion: "containerd://2.2.9",
		KubeletVersion: KubeletVersion, OperatingSystem: got.OperatingSystem, Architecture: got.Architecture,
	}
	if got != want {
		t.Errorf("nodeInfo:\n got %+v\nwant %+v", got, want)
	}
	// A status update keeps telling it (SetStatus replaces nodeInfo).
	n.Status.NodeInfo.OSImage = "stale"
	Config{Name: "n1", Host: &h, ContainerRuntimeVersion: "containerd://2.2.9"}.SetStatus(n, time.Now())
	if n.Status.NodeInfo != want {
		t.Errorf("after SetStatus: %+v", n.Status.NodeInfo)
	}
}

// TestThisHostReadOnce: every node of the process shares one reading.
func TestThisHostReadOnce(t *testing.T) {
	a, b := ThisHost(), ThisHost()
	if a != b || a.OSImage == "" || a.KernelVersion == "" {
		t.Errorf("ThisHost: %+v then %+v", a, b)
	}
}

// versioner answers the CRI Version call with a fixed response.
type versioner struct {
	resp *runtimeapi.VersionResponse
	err  error
}

func (v versioner) Version(context.Context, string) (*runtimeapi.VersionResponse, error) {
	return v.resp, v.err
}

// TestContainerRuntimeVersion: NAME://VERSION with the version parsed and
// printed back as the kubelet does — containerd's leading v goes, and so
// does whatever follows a generic version's numbers — and Unknown for a
// version that does not parse.
func TestContainerRuntimeVersion(t *testing.T) {
	for _, c := range []struct{ name, version, want string }{
		{"containerd", "v2.2.9", "containerd://2.2.9"},
		{"containerd", "1.6.20~ds1", "containerd://1.6.20"}, // Debian's: a generic version, the rest dropped
		{"fakecri", "devel", "fakecri://Unknown"},
		{"cri-o", "1.36.0", "cri-o://1.36.0"},
		{"containerd", "v1.7.0-rc.1+abc", "containerd://1.7.0-rc.1+abc"},
		{"x", "2.1", "x://2.1"},
	} {
		got, err := ContainerRuntimeVersion(context.Background(), versioner{resp: &runtimeapi.VersionResponse{RuntimeName: c.name, RuntimeVersion: c.version}})
		if err != nil || got != c.want {
			t.Errorf("%s %s: %q, %v; want %q", c.name, c.version, got, err, c.want)
		}
	}
	if _, err := ContainerRuntimeVersion(context.Background(), versioner{err: errors.New("connection refused")}); err == nil || !strings.Contains(err.Error(), "CRI Version: connection refused") {
		t.Errorf("a runtime that does not answer: %v", err)
	}
}

// TestMockRuntimeVersionReachesTheNode: the mock CRI says what it is, and
// a node on it says so in containerRuntimeVersion (kubectl get nodes -o
// wide: CONTAINER-RUNTIME fakecri://0.1.0).
func TestMockRuntimeVersionReachesTheNode(t *testing.T) {
	mock := fakecri.New()
	defer mock.Close()
	rv, err := ContainerRuntimeVersion(context.Background(), cri.InProcess("n1", mock, mock).Runtime)
	if err != nil {
		t.Fatal(err)
	}
	h := ReadHost(aHost(), kernel("6.1.0"))
	n := Config{Name: "n1", Host: &h, ContainerRuntimeVersion: rv}.InitialNode(time.Now())
	if got := n.Status.NodeInfo.ContainerRuntimeVersion; got != "fakecri://0.1.0" {
		t.Errorf("containerRuntimeVersion %q, want fakecri://0.1.0", got)
	}
}
