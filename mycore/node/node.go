// Package node is the Node object of a node of ours and the join that
// makes it (Join: TLS bootstrap, registration, heartbeats), no more of the
// node: registering it in the API and keeping its status — conditions,
// capacity, addresses — up to date. The pods' ConfigMaps and Secrets are
// mycore/configsecret, a lab's whole node start-up (join, then our kubelet)
// is internal/labnode, the real kubelet as a node is mylib/fakenode.
//
// Status is kept the way the kubelet does in
// pkg/kubelet/kubelet_node_status.go and pkg/kubelet/nodestatus/setters.go
// (Kubernetes v1.36.3), cut down to what our nodes can honestly report:
// this machine's OS, kernel and IDs as cAdvisor reads them (host.go), and
// the runtime's name and version from its CRI Version call — or none, for
// the nodes of the labs that run no runtime.
//
// Two rules that are easy to get wrong:
//   - registering never confuses "cannot tell" with "does not exist": the
//     Node is created, and an AlreadyExists answer means it was registered
//     before (the kubelet's order); an error that says neither is returned,
//     and nothing is deleted or recreated;
//   - conditions are found and set by type, never by their index in the
//     list: other writers (the node lifecycle controller, problem
//     detectors) add and reorder conditions.
package node

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
)

// KubeletVersion is what our node reports as its kubelet version: the
// Kubernetes release this module is built against (go.mod).
const KubeletVersion = "v1.36.3"

// LabLabel marks nodes made by the labs, so they are easy to find and clean up:
// kubectl delete node -l kubelet-labs.dev/lab-node
const LabLabel = "kubelet-labs.dev/lab-node"

// NoRuntimeTaint keeps a real scheduler (kind) from placing pods on a lab
// node that has no container runtime: they would stay Pending forever.
var NoRuntimeTaint = v1.Taint{Key: LabLabel, Value: "no-runtime", Effect: v1.TaintEffectNoSchedule}

// Config describes the node we register.
type Config struct {
	Name string
	// Labels besides the kubelet's defaults (hostname, os, arch).
	Labels map[string]string
	// Taints at registration (--register-with-taints).
	Taints []v1.Taint
	// InternalIP, default 127.0.0.1.
	InternalIP string
	// Capacity, default: this machine's CPUs, memory and root file system,
	// and 110 pods (the kubelet's maxPods).
	Capacity v1.ResourceList
	// DaemonPort is the port of the node's HTTPS server, published as
	// status.daemonEndpoints.kubeletEndpoint.port: the apiserver calls
	// InternalIP:DaemonPort for logs, exec and port-forward. 0: no server.
	DaemonPort int32
	// DeclaredFeatures go into status.declaredFeatures, e.g.
	// ExtendWebSocketsToKubelet (the kubelet's nodeDeclaredFeatures,
	// kubelet_node_status.go:676-678).
	DeclaredFeatures []string
	// Host is the machine the node reports in status.nodeInfo (OS image,
	// kernel, machine ID, system UUID, boot ID); nil: this machine's,
	// ThisHost, read once per process.
	Host *Host
	// ContainerRuntimeVersion is status.nodeInfo.containerRuntimeVersion,
	// "NAME://VERSION" as ContainerRuntimeVersion makes it from the
	// runtime's CRI Version answer. "" for a node with no container
	// runtime (labs 02-05): kubectl shows <unknown>, which is the truth.
	ContainerRuntimeVersion string
}

// InitialNode is the Node we create: the kubelet's initialNode
// (kubelet_node_status.go) with its status filled by SetStatus.
func (c Config) InitialNode(now time.Time) *v1.Node {
	labels := map[string]string{
		v1.LabelHostname:   c.Name,
		v1.LabelOSStable:   runtime.GOOS,
		v1.LabelArchStable: runtime.GOARCH,
	}
	for k, v := range c.Labels {
		labels[k] = v
	}
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: c.Name, Labels: labels},
		Spec:       v1.NodeSpec{Taints: append([]v1.Taint(nil), c.Taints...)},
	}
	c.SetStatus(n, now)
	return n
}

// Register registers the Node in the kubelet's order
// (tryRegisterWithAPIServer, pkg/kubelet/kubelet_node_status.go lines
// 90-146, v1.36.3): Create first. Success: created. AlreadyExists: the node
// was registered before, so Get it and go on with it. Forbidden: the node
// may still exist (a policy can forbid creating but allow reading), so Get
// it too — the kubelet does so unless the deprecated feature gate
// KubeletRegistrationGetOnExistsOnly is on. Any other error is returned
// (the kubelet retries with backoff, 100 ms doubling to 7 s). Creating
// first lets the apiserver decide atomically whether the Node exists; no
// Get result is ever taken to mean "absent". Safe to call on every start.
//
// The kubelet then reconciles a few fields of an existing Node (default
// labels, the attach-detach annotation, extended and huge page resources)
// with a patch; our nodes have nothing of that to reconcile, and their
// status is posted right after.
func Register(ctx context.Context, client kubernetes.Interface, node *v1.Node) (got *v1.Node, created bool, err error) {
	nodes := client.CoreV1().Nodes()
	got, createErr := nodes.Create(ctx, node, metav1.CreateOptions{})
	switch {
	case createErr == nil:
		return got, true, nil
	case !apierrors.IsAlreadyExists(createErr) && !apierrors.IsForbidden(createErr):
		// A timeout, a 5xx, an invalid Node: we know no more than before.
		// Returned, never guessed at.
		return nil, false, fmt.Errorf("create node %s: %w", node.Name, createErr)
	}
	existing, err := nodes.Get(ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsForbidden(createErr) {
			return nil, false, fmt.Errorf("create node %s: %w (and get: %v)", node.Name, createErr, err)
		}
		return nil, false, fmt.Errorf("node %s exists, but get: %w", node.Name, err)
	}
	return existing, false, nil
}

// SetStatus is our list of status setters (the kubelet's
// defaultNodeStatusFuncs): addresses, machine info, version info, then the
// conditions, each set by type. It never touches conditions it does not own.
func (c Config) SetStatus(n *v1.Node, now time.Time) {
	ip := c.InternalIP
	if ip == "" {
		ip = "127.0.0.1"
	}
	n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}, {Type: v1.NodeHostName, Address: c.Name}}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = c.DaemonPort
	n.Status.DeclaredFeatures = append([]string(nil), c.DeclaredFeatures...)

	capacity := c.Capacity
	if capacity == nil {
		capacity = MachineCapacity()
	}
	// As the kubelet's MachineInfo setter (setters.go:209-316 at v1.36.3):
	// our resources are set key by key, so an extended resource someone
	// else advertises on the node (a PATCH of status.capacity, as the
	// scheduler's preemption specs and the "advertise extended resources"
	// task do) stays; allocatable follows capacity (no system or kube
	// reservations here), and an extended resource gone from capacity
	// leaves allocatable too.
	if n.Status.Capacity == nil {
		n.Status.Capacity = v1.ResourceList{}
	}
	for k, v := range capacity {
		n.Status.Capacity[k] = v.DeepCopy()
	}
	if n.Status.Allocatable == nil {
		n.Status.Allocatable = v1.ResourceList{}
	}
	for k := range n.Status.Allocatable {
		if _, found := n.Status.Capacity[k]; !found && v1helper.IsExtendedResourceName(k) {
			delete(n.Status.Allocatable, k)
		}
	}
	for k, v := range n.Status.Capacity {
		n.Status.Allocatable[k] = v.DeepCopy()
	}

	// The kubelet's MachineInfo and VersionInfo setters (setters.go:228-229,
	// :254, :352-359; see Host and ContainerRuntimeVersion).
	host := c.Host
	if host == nil {
		h := ThisHost()
		host = &h
	}
	n.Status.NodeInfo = v1.NodeSystemInfo{
		MachineID:               host.MachineID,
		SystemUUID:              host.SystemUUID,
		BootID:                  host.BootID,
		KernelVersion:           host.KernelVersion,
		OSImage:                 host.OSImage,
		ContainerRuntimeVersion: c.ContainerRuntimeVersion,
		KubeletVersion:          KubeletVersion,
		OperatingSystem:         runtime.GOOS,
		Architecture:            runtime.GOARCH,
	}

	hb := metav1.NewTime(now)
	for _, cond := range []v1.NodeCondition{
		{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: v1.NodeDiskPressure, Status: v1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: v1.NodePIDPressure, Status: v1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
		readyCondition(n), // last, as the kubelet keeps it (setters.go ReadyCondition)
	} {
		cond.LastHeartbeatTime = hb
		SetCondition(&n.Status, cond, now)
	}
}

// readyCondition is the kubelet's ReadyCondition, without a runtime to ask:
// True when the capacity the scheduler needs is reported.
func readyCondition(n *v1.Node) v1.NodeCondition {
	var missing []string
	for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourcePods, v1.ResourceEphemeralStorage} {
		if _, ok := n.Status.Capacity[r]; !ok {
			missing = append(missing, string(r))
		}
	}
	if len(missing) > 0 {
		return v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: "KubeletNotReady",
			Message: "missing node capacity for resources: " + strings.Join(missing, ", ")}
	}
	return v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"}
}

// SetCondition puts cond into status by its type: it replaces the condition
// of that type wherever it is in the list, or appends it. LastTransitionTime
// moves to now only when Status changes (setters.go keeps it otherwise).
func SetCondition(status *v1.NodeStatus, cond v1.NodeCondition, now time.Time) {
	for i := range status.Conditions {
		if status.Conditions[i].Type != cond.Type {
			continue
		}
		if status.Conditions[i].Status == cond.Status {
			cond.LastTransitionTime = status.Conditions[i].LastTransitionTime
		} else {
			cond.LastTransitionTime = metav1.NewTime(now)
		}
		status.Conditions[i] = cond
		return
	}
	cond.LastTransitionTime = metav1.NewTime(now)
	status.Conditions = append(status.Conditions, cond)
}

// GetCondition finds a condition by type (nil if absent).
func GetCondition(status *v1.NodeStatus, t v1.NodeConditionType) *v1.NodeCondition {
	for i := range status.Conditions {
		if status.Conditions[i].Type == t {
			return &status.Conditions[i]
		}
	}
	return nil
}

// MachineCapacity is what cAdvisor would report for this machine, roughly:
// CPUs, memory from /proc/meminfo, the root file system's size, 110 pods.
func MachineCapacity() v1.ResourceList {
	rl := v1.ResourceList{
		v1.ResourceCPU:  *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		v1.ResourcePods: *resource.NewQuantity(110, resource.DecimalSI),
	}
	mem := int64(4 << 30)
	if f, err := os.Open("/proc/meminfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if fields := strings.Fields(s.Text()); len(fields) >= 2 && fields[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(fields[1], 10, 64); err == nil {
					mem = kb * 1024
				}
			}
		}
		f.Close()
	}
	rl[v1.ResourceMemory] = *resource.NewQuantity(mem, resource.BinarySI)
	disk := int64(20 << 30)
	var st syscall.Statfs_t
	if syscall.Statfs("/", &st) == nil {
		disk = int64(st.Blocks) * int64(st.Bsize)
	}
	rl[v1.ResourceEphemeralStorage] = *resource.NewQuantity(disk, resource.BinarySI)
	return rl
}

func utsString[T int8 | uint8](b []T) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
