package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	internalapi "k8s.io/cri-api/pkg/apis"
)

// Host is what a node says about the machine it runs on, in
// status.nodeInfo. The kubelet gets it from cAdvisor (github.com/google/
// cadvisor v0.56.2, the version go.mod resolves) and sets it with two of
// its status setters (pkg/kubelet/nodestatus/setters.go, v1.36.3):
// VersionInfo (:342-371) copies KernelVersion and OSImage from cAdvisor's
// VersionInfo at :352-353, MachineInfo (:195-339) copies MachineID and
// SystemUUID at :228-229 and BootID at :254 from cAdvisor's MachineInfo.
type Host struct {
	// OSImage is PRETTY_NAME of os-release ("Debian GNU/Linux 12
	// (bookworm)"): what kubectl get nodes -o wide shows as OS-IMAGE.
	OSImage string
	// KernelVersion is uname's release ("6.1.0-28-amd64").
	KernelVersion string
	// MachineID, SystemUUID and BootID name the machine, its hardware and
	// this boot of it; "" when nothing could be read.
	MachineID, SystemUUID, BootID string
}

// The files cAdvisor reads, relative to the root of the file system given
// to ReadHost (fs.FS paths have no leading slash).
var (
	// machine/operatingsystem_unix.go:41-45: /etc/os-release, or
	// /usr/lib/os-release when the first does not exist.
	osReleaseFiles = []string{"etc/os-release", "usr/lib/os-release"}
	// machine/info.go:41 (the -machine_id_file default), read by
	// getInfoFromFiles (:44-56): the first file that can be read.
	machineIDFiles = []string{"etc/machine-id", "var/lib/dbus/machine-id"}
	// machine/info.go:42 (the -boot_id_file default).
	bootIDFiles = []string{"proc/sys/kernel/random/boot_id"}
	// utils/sysfs/sysfs.go:448-460, GetSystemUUID: the DMI product UUID
	// (sysfs.go:35 dmiDir; readable by root only), else the device tree's
	// ids on ppc64, else /etc/machine-id (s390xDevTree, sysfs.go:37) —
	// tried on every machine, so a non-root process on x86 reports its
	// machine ID as its system UUID, as cAdvisor would in its place.
	systemUUIDFiles = []string{"sys/class/dmi/id/product_uuid", "proc/device-tree/system-id", "proc/device-tree/vm,uuid", "etc/machine-id"}
)

// prettyName is cAdvisor's own expression (machine/operatingsystem_unix.go:29).
var prettyName = regexp.MustCompile("(PRETTY_NAME)=(.*)")

// ReadHost reads the machine's facts as cAdvisor does, from root (the
// machine's file system; os.DirFS("/") for this one) and kernel (uname's
// release). What cannot be read is what cAdvisor reports then: OSImage
// "Unknown" (machine/info.go:165-171) — or "Linux" when os-release has no
// PRETTY_NAME (operatingsystem_unix.go:50-53) —, KernelVersion "Unknown"
// (info.go:173-179), the IDs "". Never an error: a node that cannot read
// its machine ID still runs pods, and the kubelet does not stop for it
// either (info.go:118-121 only logs).
func ReadHost(root fs.FS, kernel func() (string, error)) Host {
	h := Host{OSImage: "Unknown", KernelVersion: "Unknown"}
	if b, err := readOSRelease(root); err == nil {
		h.OSImage = "Linux"
		if m := prettyName.FindAllStringSubmatch(string(b), -1); len(m) > 0 {
			h.OSImage = strings.Trim(m[0][2], `"`)
		}
	}
	if k, err := kernel(); err == nil {
		h.KernelVersion = k
	}
	h.MachineID = firstReadable(root, machineIDFiles)
	h.BootID = firstReadable(root, bootIDFiles)
	h.SystemUUID = firstReadable(root, systemUUIDFiles)
	return h
}

// readOSRelease falls back to /usr/lib/os-release only when /etc's does
// not exist: one that exists but cannot be read is an error, as upstream.
func readOSRelease(root fs.FS) ([]byte, error) {
	b, err := fs.ReadFile(root, osReleaseFiles[0])
	if errors.Is(err, fs.ErrNotExist) {
		b, err = fs.ReadFile(root, osReleaseFiles[1])
	}
	return b, err
}

// firstReadable is cAdvisor's getInfoFromFiles: the first file that reads,
// trimmed of white space (and of the NUL a device tree ends its strings
// with, sysfs.go:452,454), or "".
func firstReadable(root fs.FS, files []string) string {
	for _, f := range files {
		if b, err := fs.ReadFile(root, f); err == nil {
			return strings.TrimSpace(strings.TrimRight(string(b), "\x00"))
		}
	}
	return ""
}

// kernelRelease is cAdvisor's KernelVersion (machine/info.go:173-179).
func kernelRelease() (string, error) {
	var uts syscall.Utsname
	if err := syscall.Uname(&uts); err != nil {
		return "", err
	}
	return utsString(uts.Release[:]), nil
}

// thisHost is read the first time a node needs it and then shared by every
// node of the process: a fleet of a thousand nodes on one machine reads
// these files once, not a thousand times every status update. The kubelet
// reads MachineInfo once at start (kl.machineInfo, returned by
// GetCachedMachineInfo, kubelet_getters.go:462-466) but asks cAdvisor's
// VersionInfo again at every status update, which reads os-release and
// calls uname each time (cadvisor manager/manager.go:859-865, 1404-1415);
// ours keeps both for the life of the process — an upgrade of the OS
// under a running node shows after the node restarts.
var thisHost = sync.OnceValue(func() Host { return ReadHost(os.DirFS("/"), kernelRelease) })

// ThisHost is this machine's Host, read once per process (see thisHost).
func ThisHost() Host { return thisHost() }

// kubeRuntimeAPIVersion is what the kubelet passes to the CRI Version call
// (pkg/kubelet/kuberuntime/kuberuntime_manager.go:82).
const kubeRuntimeAPIVersion = "0.1.0"

// ContainerRuntimeVersion asks the runtime its name and version with the
// CRI Version call and writes them as the kubelet's VersionInfo setter
// does (setters.go:355-359): "NAME://VERSION" from the answer's
// RuntimeName (which the kubelet keeps as its runtime's Type,
// kuberuntime_manager.go:292-307, 384-386) and RuntimeVersion, parsed as a
// semantic version, else a generic one (newRuntimeVersion, :388-393), and
// printed back — so containerd's "v2.2.9" becomes "containerd://2.2.9" —
// or "Unknown" when it does not parse (the kubelet's Version returns the
// parse error, :404-411, and the setter then writes "Unknown").
//
// A runtime that does not answer is an error: the kubelet does not start
// without that answer (kuberuntime_manager.go:292-296). The kubelet asks
// again at every status update (and would write NAME://Unknown while the
// runtime is down); our nodes ask once, at start, and report that.
func ContainerRuntimeVersion(ctx context.Context, runtime internalapi.RuntimeVersioner) (string, error) {
	v, err := runtime.Version(ctx, kubeRuntimeAPIVersion)
	if err != nil {
		return "", fmt.Errorf("CRI Version: %w", err)
	}
	version := "Unknown"
	parsed, err := utilversion.ParseSemantic(v.RuntimeVersion)
	if err != nil {
		parsed, err = utilversion.ParseGeneric(v.RuntimeVersion)
	}
	if err == nil {
		version = parsed.String()
	}
	return v.RuntimeName + "://" + version, nil
}
