package mykubelet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/kubernetes/pkg/kubelet/pleg"
	kubepod "k8s.io/kubernetes/pkg/kubelet/pod"
	proberesults "k8s.io/kubernetes/pkg/kubelet/prober/results"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
	"k8s.io/utils/clock"

	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/journal"
	"kubelet-labs/mycore/kuberuntime"
	"kubelet-labs/mycore/logrotate"
	"kubelet-labs/mycore/mirror"
	"kubelet-labs/mycore/plegruntime"
	"kubelet-labs/mycore/podconfig"
	"kubelet-labs/mycore/podworkers"
	"kubelet-labs/mycore/prober"
	"kubelet-labs/mycore/status"
	"kubelet-labs/mycore/volumes"
)

// The kubelet's defaults (kubelet.go:205-230, :1068, kubelet_pods.go).
const (
	DefaultRelistPeriod       = time.Second       // genericPlegRelistPeriod
	DefaultRelistThreshold    = 3 * time.Minute   // genericPlegRelistThreshold
	DefaultHousekeepingPeriod = 2 * time.Second   // housekeepingPeriod
	DefaultBackOffInitial     = 10 * time.Second  // crashLoopBackOff initial
	DefaultBackOffMax         = 300 * time.Second // MaxContainerBackOff
	backOffReset              = 600 * time.Second // a container that ran this long restarts without back-off
	plegChannelCapacity       = 1000              // plegChannelCapacity
	DefaultGCPeriod           = time.Minute       // ContainerGCPeriod
)

// NodeLabel is put on every sandbox and container a node creates, and the
// node lists only what carries its name. The course runs several nodes and
// tests on one containerd; a kubelet owns its runtime and has no such label.
const NodeLabel = "kubelet-labs/node"

// Options configure a Kubelet. NodeName, Client and CRI are required.
type Options struct {
	NodeName string
	// Client acts as the node (system:node:NAME): the Node authorizer and
	// NodeRestriction then check every call, as for a real kubelet.
	Client kubernetes.Interface
	// CRI is the runtime: containerd or the mock.
	CRI *cri.Client
	// PodLogsDir is where container logs go (the kubelet's /var/log/pods),
	// in a folder named after the node: the course's nodes share one
	// containerd and its log folder, and each node's garbage collector
	// removes the log folders of its own pods only. See Kubelet.PodLogsDir.
	PodLogsDir string
	// PodsDir is the node's folder of pod data, for the pods' volumes
	// (mycore/volumes); empty: pods run without their volumes (the mock
	// runtime's nodes, where no container could see them).
	PodsDir string
	// HostIPs are the node's InternalIPs, for status.hostIP(s) and the
	// status.hostIP downward-API field.
	HostIPs []string
	// Zero values take the kubelet's defaults above.
	RelistPeriod, HousekeepingPeriod time.Duration
	BackOffInitial, BackOffMax       time.Duration
	ResyncInterval, StatusSyncPeriod time.Duration
	// GCPeriod: how often dead containers and sandboxes of pods that are
	// over are removed (the kubelet's ContainerGCPeriod, 1 min).
	GCPeriod time.Duration
	// Journal, if set, is where the node publishes every step (config ops,
	// PLEG events and relists, workers, CRI calls, status posts): the live
	// view reads it. nil: the node makes its own, which keeps no backlog.
	Journal *journal.Bus
	// Log gets one line per step: the journal's entries that have a
	// line, printed (journal.PrintSink); nil is silent.
	Log func(format string, args ...any)
	// Updates, if set, is the node's pod source and Run does not start its
	// own: in fleet mode the fleet starts each node's podconfig.Watch with
	// the node's identity, before the kubelet runs. Run stops reading it
	// when its context ends; whoever sends must stop on that too.
	Updates <-chan kubetypes.PodUpdate
	// ShutdownGracePeriod, if set, makes the end of Run a graceful node
	// shutdown (the kubelet's shutdownGracePeriod): every pod is stopped
	// with grace min(its own, this), reported Failed with reason
	// Terminated, and Run returns once they are. Zero: Run returns at once
	// and pods keep running, as when a kubelet restarts.
	ShutdownGracePeriod time.Duration
	// StaticPodPath is the folder (or single file) of static pod
	// manifests (the kubelet's staticPodPath); empty: no file source.
	// Each static pod gets a mirror pod in the apiserver, made with
	// Client, which carries its status.
	StaticPodPath string
	// FileCheckFrequency: how often StaticPodPath is read again besides
	// inotify (the kubelet's fileCheckFrequency, 20 s).
	FileCheckFrequency time.Duration
	// Container log rotation (mycore/logrotate): a running container's
	// log that reached ContainerLogMaxSize bytes is rotated, and at most
	// ContainerLogMaxFiles files of it are kept, the live one included;
	// checked every ContainerLogMonitorInterval. Zero values take the
	// kubelet's containerLogMaxSize 10 Mi, containerLogMaxFiles 5 and
	// containerLogMonitorInterval 10 s; a negative size turns rotation off.
	ContainerLogMaxSize         int64
	ContainerLogMaxFiles        int
	ContainerLogMonitorInterval time.Duration
	// StatusReadLastWrite: each status post is one PATCH from the pod as
	// the apiserver last returned it, not a GET then a PATCH as upstream's
	// status manager does (status.Options.ReadLastWrite says why nothing
	// is lost). Fleet mode sets it; a single node keeps upstream's way.
	StatusReadLastWrite bool
	// StatusTurns, if set, are turns to write pod status shared with
	// other kubelets of the process (status.WriteTurns): fleet mode's.
	StatusTurns *status.WriteTurns
	// Events, if set, records the node's events, and the node starts no
	// broadcaster of its own: fleet mode's nodes share a few (its
	// events.go), which must stamp each event with source kubelet/NODE.
	// nil: the node's own broadcaster while Run runs (events.go), as
	// the kubelet makes one for its process.
	Events record.EventRecorder
	// ClusterDNS and ClusterDomain are the kubelet's clusterDNS and
	// clusterDomain: the DNS servers and search domain of pods with
	// dnsPolicy ClusterFirst (mycore/kuberuntime dns.go). Zero values are
	// the kubelet's defaults: none, so those pods get this machine's
	// /etc/resolv.conf.
	ClusterDNS    []net.IP
	ClusterDomain string
	// GetNode, if set, reads the node's Node from a cache, for admission
	// (nodecache.go): fleet mode's nodes share one Node informer. nil:
	// the node watches its own Node while Run runs, as the kubelet's
	// node informer does.
	GetNode func(ctx context.Context) (*v1.Node, error)
	// InitialNode, if set, is the Node as the node registers it
	// (node.Config.InitialNode): admission's Node while the cache has
	// none, as the kubelet's initialNode. nil: a GET of the Node.
	InitialNode func() *v1.Node
	// Clock is the time the node acts on (nil: the real clock), as the
	// kubelet's clock field (kubelet.go:642, :1520-1522) and as KWOK's
	// controllers take theirs: the housekeeping tick and container GC,
	// the active deadline (deadline.go), the crash-loop back-off, the pod
	// workers' resync queue and timestamps, the probes' periods, the
	// status manager's start times and periodic sync, the PLEG's relist
	// times and health, the graceful shutdown's wait. A test steps a fake
	// one (k8s.io/utils/clock/testing) instead of sleeping. Times the
	// runtime reports (a container's startedAt, finishedAt) are its own:
	// a fake clock should start at the real time, as NewFakeClock(time.Now()).
	Clock clock.WithTicker
}

// Kubelet is one running node. Build it with New, run it with Run.
type Kubelet struct {
	// The config handlers (HandlePodAdditions ... HandlePodSyncs) are
	// podworkers.Handlers': each update into the pod manager, then to the
	// pod's worker. HandlePodAdditions is ours (admit.go): the admission.
	podworkers.Handlers

	o       Options
	clock   clock.WithTicker // Options.Clock, or the real one
	journal *journal.Bus
	pods    kubepod.Manager
	cache   kubecontainer.Cache
	runtime *plegruntime.Runtime
	manager *kuberuntime.Manager
	pleg    *pleg.GenericPLEG
	plegCh  chan *pleg.PodLifecycleEvent
	workers *podworkers.Workers
	status  *status.Manager
	probes  *prober.Manager
	backOff *flowcontrol.Backoff
	reasons *reasonCache
	ran     bool
	// mirrors creates and deletes the mirror pods of static pods.
	mirrors *mirror.Reconciler
	// logs rotates the logs of this node's running containers.
	logs *logrotate.Rotator
	// services are watched for the containers' service variables.
	services *services
	// admitHandlers decide, in turn, whether a pod may run (admit.go):
	// upstream's sysctl allowlist and predicate admit handler.
	admitHandlers []lifecycle.PodAdmitHandler
	// node is the node's own Node object, for admission (nodecache.go).
	node *nodeCache
	// admitCtx is the context of the admission under way (canAdmitPod),
	// for the reads of the Node; owned by the sync loop.
	admitCtx context.Context
	// volumes sets up and tears down the pods' volumes; nil without PodsDir.
	volumes *volumes.Manager
	// recorder records the node's events: Options.Events, or own's.
	recorder record.EventRecorder
	// own is the node's own broadcaster (events.go), started while Run
	// runs; nil when Options.Events records.
	own *nodeRecorder

	// Owned by the sync loop: every pod source (the apiserver and, with
	// StaticPodPath, the files) delivered its first list — nothing that
	// looks gone may be killed or collected before (sourcesReady.AllReady,
	// kubelet.go:2797) — and when the last garbage collection ran.
	sourcesReady bool
	lastGC       time.Time
	// runtimeFeatures are the runtime's features as its last CRI Status
	// that answered gave them (the kubelet's runtimeState.runtimeFeatures,
	// runtime.go:98): admission's node.status.features, and what it falls
	// back on when Status fails.
	runtimeFeatures *kubecontainer.RuntimeFeatures

	// The probe results (kubelet.go:687-689): the prober writes them, the
	// runtime manager reads liveness and startup, the sync loop receives
	// every change.
	liveness, readiness, startup proberesults.Manager
}

// New builds a Kubelet; nothing runs until Run.
func New(o Options) (*Kubelet, error) {
	if o.NodeName == "" || o.Client == nil || o.CRI == nil {
		return nil, errors.New("kubelet: Options.NodeName, Client and CRI are required")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.RelistPeriod, DefaultRelistPeriod)
	def(&o.HousekeepingPeriod, DefaultHousekeepingPeriod)
	def(&o.BackOffInitial, DefaultBackOffInitial)
	def(&o.BackOffMax, DefaultBackOffMax)
	def(&o.GCPeriod, DefaultGCPeriod)
	def(&o.FileCheckFrequency, podconfig.DefaultFileCheckFrequency)
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	k := &Kubelet{
		o:       o,
		clock:   o.Clock,
		journal: o.Journal,
		pods:    kubepod.NewBasicPodManager(),
		cache:   kubecontainer.NewCache(),
		runtime: plegruntime.New(o.CRI, plegruntime.WithLabels(map[string]string{NodeLabel: o.NodeName})),
		plegCh:  make(chan *pleg.PodLifecycleEvent, plegChannelCapacity),
		backOff: flowcontrol.NewFakeBackOff(o.BackOffInitial, o.BackOffMax, o.Clock), // NewBackOff on our clock
		reasons: newReasonCache(),
	}
	k.liveness, k.readiness, k.startup = proberesults.NewManager(), proberesults.NewManager(), proberesults.NewManager()
	if k.journal == nil {
		// No backlog: fleet mode runs a thousand of these.
		k.journal = journal.New(journal.Options{Node: o.NodeName, Backlog: -1})
	}
	if o.Log != nil {
		k.journal.AddSink(journal.PrintSink(o.Log))
	}
	// A back-off is forgotten once its container ran 10 minutes without
	// failing (kubelet.go:1069-1071); flowcontrol's own rule is twice the max.
	k.backOff.HasExpiredFunc = func(eventTime, lastUpdate time.Time, _ time.Duration) bool {
		return eventTime.Sub(lastUpdate) > backOffReset
	}
	if o.PodLogsDir != "" {
		o.PodLogsDir = filepath.Join(o.PodLogsDir, o.NodeName)
		k.o.PodLogsDir = o.PodLogsDir
	}
	k.services = newServices(k)
	k.recorder = o.Events
	if k.recorder == nil {
		k.own = &nodeRecorder{client: o.Client, nodeName: o.NodeName}
		k.recorder = k.own
	}
	k.node = &nodeCache{name: o.NodeName, client: o.Client, initial: o.InitialNode}
	if o.GetNode != nil {
		k.node.cached = o.GetNode
	}
	sysctls, err := newSysctlAdmission(context.Background())
	if err != nil {
		return nil, err
	}
	k.admitHandlers = []lifecycle.PodAdmitHandler{sysctls, k.newPredicateAdmission()}
	if k.volumes, err = newVolumes(o, k.log); err != nil {
		return nil, err
	}
	ro := kuberuntime.Options{PodLogsDir: o.PodLogsDir, PodsDir: o.PodsDir, Labels: map[string]string{NodeLabel: o.NodeName}, Journal: k.journal,
		Liveness: k.liveness, Startup: k.startup, Env: k.envSources(), Recorder: k.recorder,
		ClusterDNS: o.ClusterDNS, ClusterDomain: o.ClusterDomain, NodeName: o.NodeName}
	if k.volumes != nil {
		ro.Volumes = k.volumes
	}
	k.manager = kuberuntime.New(o.CRI, ro)
	// The PLEG is upstream's, unchanged: it lists the runtime every
	// RelistPeriod, writes the pod cache and sends an event per change.
	// It stamps the cache with our clock, where upstream gives it
	// clock.RealClock{} (kubelet.go:867) beside the workers' klet.clock,
	// which is real outside tests too: each worker waits for a cache newer
	// than its last sync (GetNewerThan), read from the workers' clock, so
	// the two must be one clock, or a fake one stepped ahead stalls them.
	k.pleg = pleg.NewGenericPLEG(klog.Background(), k.runtime, k.plegCh,
		&pleg.RelistDuration{RelistPeriod: o.RelistPeriod, RelistThreshold: DefaultRelistThreshold},
		relistWatch{Cache: k.cache, journal: k.journal, threshold: DefaultRelistThreshold, now: k.clock.Now, calls: o.CRI.Meter()}, k.clock).(*pleg.GenericPLEG)
	w, err := podworkers.New(podworkers.Options{
		Syncer:         &syncer{k: k},
		Cache:          k.cache,
		ResyncInterval: o.ResyncInterval,
		OnEvent:        k.onWorkerEvent,
		Clock:          k.clock, // upstream: the work queue's klet.clock (kubelet.go:735), podWorkers.clock (pod_workers.go:620-621)
	})
	if err != nil {
		return nil, err
	}
	k.workers = w
	k.Handlers = podworkers.Handlers{Pods: k.pods, Workers: w}
	// The pod manager, as upstream's NewManager takes it (status_manager.go:
	// 212): the status manager re-posts a status someone else overwrote,
	// deletes a finished pod the pod source shows deleted, and forgets a
	// last write once the pod source has delivered it.
	k.status = status.NewManager(o.Client, w, status.Options{SyncPeriod: o.StatusSyncPeriod, Clock: k.clock, Journal: k.journal, Pods: k.pods, Mirrors: k.pods, ReadLastWrite: o.StatusReadLastWrite, Turns: o.StatusTurns})
	k.mirrors = &mirror.Reconciler{NodeName: o.NodeName, Pods: k.pods,
		Client: mirror.NewClient(o.Client, o.NodeName), Nodes: mirror.NodeGetter{Client: o.Client}}
	// Probes read pod IPs and container IDs from the status manager and
	// run exec probes through the runtime manager (CRI ExecSync).
	k.probes = prober.NewManager(prober.Options{Runner: k.manager, Status: k.status,
		Liveness: k.liveness, Readiness: k.readiness, Startup: k.startup, Log: k.probeLog, Recorder: k.recorder, Clock: k.clock})
	// The container log manager (kubelet.go:720-732): the runtime writes
	// the logs, only the kubelet bounds them. Only this node's containers:
	// the course's nodes share one runtime.
	k.logs, err = logrotate.New(o.CRI.Runtime, logrotate.Options{
		MaxSize: o.ContainerLogMaxSize, MaxFiles: o.ContainerLogMaxFiles, Interval: o.ContainerLogMonitorInterval,
		Selector: map[string]string{NodeLabel: o.NodeName},
		Log:      func(format string, args ...any) { k.log("logs    "+format, args...) },
	})
	if err != nil {
		return nil, err
	}
	return k, nil
}

// Run is the kubelet's Run + syncLoop (kubelet.go:1850, :2620): start the
// status manager and the PLEG, watch the pods bound to the node (and the
// static pod manifests of Options.StaticPodPath), and loop until ctx is
// done. It returns after every goroutine it started has
// exited. Containers keep running, as when a kubelet restarts: the next Run
// finds them through the PLEG (and stops those whose pod is gone) — unless
// Options.ShutdownGracePeriod asks for a graceful node shutdown first.
func (k *Kubelet) Run(ctx context.Context) error {
	if k.ran {
		return errors.New("kubelet: Run called twice")
	}
	k.ran = true
	// The node's parts (status manager, PLEG, workers, informer) run on
	// their own context: a graceful shutdown needs them after ctx ends.
	node, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	// Events go out from the start and until everything else has
	// stopped (the last kills record Killing events).
	if k.own != nil {
		k.own.start()
		defer k.own.stop()
	}
	defer wg.Wait()
	defer cancel()

	wg.Go(func() { k.status.Run(node) })
	wg.Go(func() { k.services.run(node) })
	if k.o.GetNode == nil {
		wg.Go(func() { k.node.runInformer(node) })
	}
	// Log rotation runs while pods may still write: until the node's
	// parts stop (containerLogManager.Start, kubelet.go:1830, in
	// initializeRuntimeDependentModules, which Run starts).
	wg.Go(func() { k.logs.Run(node) })
	k.pleg.Start()
	defer k.pleg.Stop()
	// Workers stop before the PLEG: Stop keeps the cache's clock moving so
	// workers blocked in GetNewerThan wake up and leave.
	defer k.workers.Stop()
	// Probe workers stop first: they may be blocked handing a result to
	// the loop, which has returned by then; Stop drains those.
	defer k.probes.Stop()

	updates, own := k.o.Updates, false
	if updates == nil {
		updates, own = podconfig.Watch(node, k.o.Client, k.o.NodeName), true
	}
	files := k.fileSource(node) // nil without StaticPodPath
	housekeeping := k.clock.NewTicker(k.o.HousekeepingPeriod)
	defer housekeeping.Stop()
	k.syncLoop(ctx, updates, files, housekeeping.C())
	if k.o.ShutdownGracePeriod > 0 {
		k.shutdown(node)
		k.releaseVolumes(node) // volumes.go
	}
	cancel()
	if own {
		for range updates { // the source closes it once its informer is gone
		}
	}
	if files != nil {
		for range files { // closed once its goroutines are gone
		}
	}
	return nil
}

// PodLogsDir is the folder this node's pods log into: Options.PodLogsDir/NODE.
func (k *Kubelet) PodLogsDir() string { return k.o.PodLogsDir }

// LogRotator rotates the logs of this node's containers (every
// ContainerLogMonitorInterval while Run runs; RotateOnce at any time).
func (k *Kubelet) LogRotator() *logrotate.Rotator { return k.logs }

// Pods is the pod manager: the pods this node should run.
func (k *Kubelet) Pods() kubepod.Manager { return k.pods }

// Workers are the pod workers, for labs that print their states.
func (k *Kubelet) Workers() *podworkers.Workers { return k.workers }

// Probes is the probe manager.
func (k *Kubelet) Probes() *prober.Manager { return k.probes }

// Status is the status manager.
func (k *Kubelet) Status() *status.Manager { return k.status }

// Runtime is the PLEG's view of the runtime (kubecontainer.Runtime).
func (k *Kubelet) Runtime() *plegruntime.Runtime { return k.runtime }

// Healthy is the PLEG's health, as the kubelet's /healthz reports it.
func (k *Kubelet) Healthy() error {
	if ok, err := k.pleg.Healthy(); !ok {
		return fmt.Errorf("PLEG is not healthy: %w", err)
	}
	return nil
}
