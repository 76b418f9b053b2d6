package kuberuntime

import (
	"net"

	"k8s.io/client-go/tools/record"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/network/dns"

	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/journal"
)

// Manager runs pods on one CRI runtime. Safe for concurrent use by the pod
// workers: it keeps no per-pod state (the runtime and its labels are the
// state, as for the kubelet).
type Manager struct {
	// cri is the only way to the runtime (door.go): it records each call
	// on the journal. The Manager keeps no client that could go around it.
	cri         *criDoor
	podLogsDir  string
	podsDir     string
	volumes     VolumeMounter
	seccompRoot string
	labels      map[string]string
	env         *EnvSources
	memCapacity int64
	// journal gets every step (journal.go); log prints a step of no
	// particular kind on it.
	journal *journal.Bus
	// liveness and startup are the prober's results (Options).
	liveness, startup ProbeResults
	// recorder records the container events (hooks.go, events.go); hooks
	// runs lifecycle hooks.
	recorder record.EventRecorder
	hooks    kubecontainer.HandlerRunner
	// dns gives each sandbox its resolv.conf and holds the cluster domain
	// (dns.go).
	dns *dns.Configurer
	// pulls is the image pulls' back-off (imagepull.go).
	pulls *imagePulls
}

// Options configure a Manager.
type Options struct {
	// PodLogsDir is the kubelet's --pod-logs-dir (/var/log/pods there):
	// each pod gets NAMESPACE_NAME_UID/ in it, each container NAME/N.log
	// with N its restart count. Required: a container with no log is one
	// kubectl logs cannot show.
	PodLogsDir string
	// PodsDir is the node's folder of pod data (the kubelet's ROOT/pods):
	// each container's termination-message file and the pod's managed
	// /etc/hosts go under PodsDir/UID. Empty: neither is mounted.
	PodsDir string
	// Volumes gives containers the mounts of their volumes
	// (mycore/volumes.Manager), which the kubelet sets up before the sync
	// reaches the runtime. nil: containers run without them (the mock
	// runtime's nodes).
	Volumes VolumeMounter
	// SeccompProfileRoot is the folder of Localhost seccomp profiles (the
	// kubelet's ROOT/seccomp). The runtime, as root, reads the file it
	// names, so it belongs in a folder only root can write. Empty: pods
	// asking for a Localhost profile are refused.
	SeccompProfileRoot string
	// Labels are added to every sandbox and container, so one runtime can
	// serve several nodes that each list only their own (runtime.WithLabels).
	Labels map[string]string
	// Env is where envFrom and valueFrom read config maps, secrets,
	// services and the node's allocatable (env.go); nil: pods that need
	// them are refused with CreateContainerConfigError.
	Env *EnvSources
	// MemoryCapacity is the node's memory in bytes, for the containers'
	// oom_score_adj (resources.go); 0: this machine's.
	MemoryCapacity int64
	// Journal, if set, gets one entry per CRI call (with its pod and its
	// latency; those that change something also print a line), each
	// computePodActions decision and each crash-loop back-off; Log, if
	// Journal is nil, gets the printed lines.
	Journal *journal.Bus
	Log     func(format string, args ...any)
	// Liveness and Startup are the prober's results: a container whose
	// probe says Failure is killed by the next SyncPod
	// (NewKubeGenericRuntimeManager takes the kubelet's livenessManager and
	// startupManager the same way). nil: no probes.
	Liveness, Startup ProbeResults
	// Recorder, if set, records the kubelet's container events (Pulled,
	// Created, Started, Killing, FailedPostStartHook, FailedPreStopHook…)
	// as the node; nil records none.
	Recorder record.EventRecorder
	// ClusterDNS and ClusterDomain are the kubelet's clusterDNS and
	// clusterDomain (--cluster-dns, --cluster-domain): the DNS servers a
	// dnsPolicy ClusterFirst pod gets, and the domain of its search list
	// and of its /etc/hosts name with spec.subdomain. The kubelet's
	// defaults are none and "": ClusterFirst pods then get the host's DNS
	// (dns.go).
	ClusterDNS    []net.IP
	ClusterDomain string
	// ResolvConf is the kubelet's resolvConf: the host's resolver file,
	// the base of every pod's (dnsPolicy Default takes it whole).
	// Empty: /etc/resolv.conf, the kubelet's default.
	ResolvConf string
	// NodeName names the node in the DNS configurer's events about it
	// (MissingClusterDNS).
	NodeName string
}

// New returns a Manager over c.
func New(c *cri.Client, o Options) *Manager {
	m := &Manager{podLogsDir: o.PodLogsDir, podsDir: o.PodsDir, volumes: o.Volumes, seccompRoot: o.SeccompProfileRoot, labels: o.Labels, env: o.Env, memCapacity: o.MemoryCapacity, journal: journal.Or(o.Journal, o.Log), liveness: o.Liveness, startup: o.Startup}
	m.recorder = o.Recorder
	m.dns = newDNSConfigurer(o)
	m.pulls = newImagePulls()
	m.cri = newCRIDoor(c, m.journal)
	if c != nil { // nil: a Manager that only computes (actions_test.go)
		m.hooks = newHookRunner(m, o.Recorder)
	}
	return m
}

// isNotFound: the object is already gone, which for a stop or remove is
// success (containerd 1.6 says NotFound, newer runtimes say nothing).
func isNotFound(err error) bool { return cri.IsNotFound(err) }
