package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/kubernetes/pkg/features"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/mycore/lease"
	"kubelet-labs/mycore/node"
	"kubelet-labs/mycore/podconfig"
	"kubelet-labs/mycore/status"
)

// Defaults.
const (
	DefaultPrefix = "mykubelet"
	// MaxNodes: names have four digits, pod CIDRs are /24s in 10.64.0.0/10.
	MaxNodes = 10000
	// DefaultRegisterParallelism: how many Node creates are in flight at
	// once while the fleet registers.
	DefaultRegisterParallelism = 16
	// DefaultNodesPerConnection: how many nodes share one connection for
	// their requests (see Options.NodesPerConnection).
	DefaultNodesPerConnection = 100
	// DefaultStatusWrites: how many status writes (a pod's status PATCH,
	// the final DELETE) the fleet's nodes have in flight together (see
	// Options.StatusWrites). Measured at 1,000 nodes and 10,000 pods
	// (issue 41, one round each, driver at 1,000 requests a second):
	// 32 turns held the Running posts back (create → Running p50 29 s),
	// no limit wrote each deleted pod's status twice (3.0 requests on pods
	// per pod while deleting, all gone 132 s); 128: p50 4.7 s, 2.1, 113 s.
	DefaultStatusWrites = 128
)

// DefaultCapacity is what each node reports: KWOK's default fake node
// (32 CPUs, 256 GiB) with the kubelet's 110 pods. A fleet node has no
// machine of its own; reporting this machine's CPUs a thousand times over
// would be no truer.
func DefaultCapacity() v1.ResourceList {
	return v1.ResourceList{
		v1.ResourceCPU:              resource.MustParse("32"),
		v1.ResourceMemory:           resource.MustParse("256Gi"),
		v1.ResourcePods:             resource.MustParse("110"),
		v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
}

// Options configure a Fleet. Config, Nodes and Dir are required.
type Options struct {
	// Config is the kubeconfig's credential (the admin's). By default the
	// fleet uses it once, at start, to make its own narrow credential
	// (ensureIdentity) and never again; with SharedIdentity every node acts
	// with it. See the package documentation, Identity.
	Config *rest.Config
	// Nodes is how many nodes run; they are named Prefix-0000, Prefix-0001…
	Nodes  int
	Prefix string
	// Shard and Shards split one fleet over several processes (machines,
	// pods of a management cluster): shard i of N runs nodes i×Nodes to
	// (i+1)×Nodes−1, so every shard names other nodes, gets their pods
	// only, and a shard that restarts takes back the same nodes. Every
	// shard must run with the same Nodes. Shards 0: one process, no shards.
	Shard, Shards int
	// QPS and Burst limit the shared client that pods and registration use
	// (a negative QPS: no client-side limit). Leases and node status go
	// through the same connection without a limit, as the kubelet's
	// separate heartbeat client does: a storm of pod updates must not
	// starve the heartbeats and make nodes NotReady.
	QPS   float32
	Burst int
	// Dir holds each node's pod logs (Dir/NODE/NAMESPACE_NAME_UID/…); the
	// fleet removes what it wrote there when it stops.
	Dir string
	// Lab is the value of node.LabLabel on every node (default
	// "18-mykubelet"): kubectl get nodes -l kubelet-labs.dev/lab-node.
	Lab string
	// Capacity of each node; nil: DefaultCapacity.
	Capacity v1.ResourceList
	// Zero values take the kubelet's defaults.
	LeaseDurationSeconds  int32
	StatusUpdateFrequency time.Duration
	RelistPeriod          time.Duration
	HousekeepingPeriod    time.Duration
	// RegisterParallelism: Node creates in flight (default 16). A node
	// whose create fails waits out its back-off without holding a place.
	RegisterParallelism int
	// StatusWrites: pod status writes of all nodes in flight at once
	// (default DefaultStatusWrites). A node's status manager waits for a
	// turn, then posts the newest status it has: one that changed while
	// it waited is posted once, not twice (status.WriteTurns). Leases and
	// node status do not wait for turns.
	StatusWrites int
	// ClusterDNS and ClusterDomain are every node's kubelet clusterDNS
	// and clusterDomain (mykubelet.Options): the resolv.conf the mock
	// runtime shows in a ClusterFirst pod. Zero: the kubelet's defaults.
	ClusterDNS    []net.IP
	ClusterDomain string
	// NodesPerConnection: nodes whose requests (pods, registration,
	// Leases, node status, events) share one HTTP/2 connection, and whose
	// pod watches share another (default 100: ten of each for 1,000
	// nodes). A kubelet has a connection
	// of its own; a thousand on one connection lose all their requests at
	// once when it is dropped, and queue behind the apiserver's limit of
	// streams per connection.
	NodesPerConnection int
	// SharedIdentity makes every node act as the credential's own user,
	// as KWOK does. By default each node's requests impersonate it
	// (system:node:NAME): see the package documentation, Identity.
	SharedIdentity bool
	// NoEvents: the nodes record no event, as KWOK's default stages —
	// a departure from the kubelet, to measure what events cost. By
	// default each node's events are written as the node (events.go).
	NoEvents bool
	// Calls, if set, counts every request of the fleet.
	Calls *Calls
	// Log gets the fleet's own lines (registration, readiness, stop).
	Log func(format string, args ...any)
	// NodeLog, if set, returns the step-by-step log of one node (nil for
	// a silent node): the kubelet's config ops, PLEG events, workers, CRI
	// calls and status posts.
	NodeLog func(node string) func(format string, args ...any)
}

// Fleet is N nodes in one process. Build it with New, run it with Run.
type Fleet struct {
	o       Options
	names   []string
	first   int // the number of the first node: Shard×Nodes
	members []*member
	ready   chan struct{}
	ran     bool
	log     func(string, ...any)
	// turns are the nodes' shared turns to write pod status
	turns *status.WriteTurns
	// client is the shared client Run built (set before any node starts):
	// for the tests, which check who its requests go as.
	client kubernetes.Interface
}

// New checks the options and the process-wide state; nothing runs until Run.
func New(o Options) (*Fleet, error) {
	if o.Config == nil {
		return nil, errors.New("fleet: Options.Config is required")
	}
	if o.Nodes < 1 || o.Nodes > MaxNodes {
		return nil, fmt.Errorf("fleet: %d nodes: must be 1 to %d", o.Nodes, MaxNodes)
	}
	if err := CheckShard(o.Shard, o.Shards, o.Nodes); err != nil {
		return nil, err
	}
	if o.Dir == "" {
		return nil, errors.New("fleet: Options.Dir is required (pod logs go there)")
	}
	if err := checkProcessState(); err != nil {
		return nil, err
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Lab == "" {
		o.Lab = "18-mykubelet"
	}
	if o.Capacity == nil {
		o.Capacity = DefaultCapacity()
	}
	if o.RegisterParallelism <= 0 {
		o.RegisterParallelism = DefaultRegisterParallelism
	}
	if o.StatusWrites <= 0 {
		o.StatusWrites = DefaultStatusWrites
	}
	if o.NodesPerConnection <= 0 {
		o.NodesPerConnection = DefaultNodesPerConnection
	}
	if o.StatusUpdateFrequency <= 0 {
		o.StatusUpdateFrequency = node.DefaultStatusUpdateFrequency
	}
	if _, _, err := (lease.Config{LeaseDurationSeconds: o.LeaseDurationSeconds}).Durations(); err != nil {
		return nil, err
	}
	turns, err := status.NewWriteTurns(o.StatusWrites)
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	f := &Fleet{o: o, ready: make(chan struct{}), log: o.Log, turns: turns}
	if f.log == nil {
		f.log = func(string, ...any) {}
	}
	f.first = o.Shard * o.Nodes
	for i := range o.Nodes {
		f.names = append(f.names, NodeName(o.Prefix, f.first+i))
	}
	return f, nil
}

// CheckShard: shard i of N, every shard's nodes numbered within MaxNodes.
func CheckShard(shard, shards, nodes int) error {
	switch {
	case shards == 0 && shard == 0:
		return nil
	case shards < 1 || shard < 0 || shard >= shards:
		return fmt.Errorf("fleet: shard %d of %d: want 0 ≤ shard < shards", shard, shards)
	case shards*nodes > MaxNodes:
		return fmt.Errorf("fleet: %d shards of %d nodes: more than %d nodes in all (names have four digits)", shards, nodes, MaxNodes)
	}
	return nil
}

// NodeName is the name of node i of a fleet: prefix-0000, prefix-0001…
func NodeName(prefix string, i int) string { return fmt.Sprintf("%s-%04d", prefix, i) }

// checkProcessState refuses what would make N nodes in one process share
// state they must not share.
func checkProcessState() error {
	if utilfeature.DefaultFeatureGate.Enabled(features.EventedPLEG) {
		return errors.New("fleet: the EventedPLEG feature gate is on: that PLEG keeps one process-wide \"in use\" flag and needs a CRI event stream, so it cannot run once per node in one process; leave it off (the generic PLEG relists)")
	}
	return nil
}

// Names are the nodes' names, in order.
func (f *Fleet) Names() []string { return append([]string(nil), f.names...) }

// Ready is closed once every node is registered and its kubelet runs;
// each node's heartbeats start right after, so its first Lease appears a
// moment later. A node whose registration keeps failing keeps it open (Run
// logs each failure); the other nodes run and renew their leases anyway.
func (f *Fleet) Ready() <-chan struct{} { return f.ready }

// Run registers the nodes and runs them until ctx ends. It returns once
// every goroutine it started has exited; the Node objects and their Leases
// stay (as when kubelets stop), the mock runtimes and everything in them
// are gone, and the pod logs it wrote are removed.
func (f *Fleet) Run(ctx context.Context) error {
	if f.ran {
		return errors.New("fleet: Run called twice")
	}
	f.ran = true
	o := f.o
	cred := o.Config
	if !o.SharedIdentity {
		// The kubeconfig's credential is used here and nowhere else.
		var err error
		role := ShardRole(o.Prefix, o.Shard, o.Shards)
		if cred, err = ensureIdentity(ctx, o.Config, role, f.names); err != nil {
			return err
		}
		f.log("identity %s (a client certificate, its key in this process only): may impersonate these %d nodes and list and watch nodes, nothing else (ClusterRole %s)", IdentityUser, len(f.names), role)
	}
	conns, watcher, err := f.clients(cred)
	if err != nil {
		return err
	}
	f.client = conns[0].client
	connOf := func(i int) nodeConn { return conns[i/o.NodesPerConnection] }
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return fmt.Errorf("fleet: pod logs folder: %w", err)
	}

	// Stop in order: every loop ends with ctx, then the pod source has
	// closed its channels, then the runtimes go (a kubelet must not find
	// its runtime gone while it still runs).
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var updates map[string]<-chan kubetypes.PodUpdate
	// The nodes' events (events.go), stopped once every node has.
	events := startFleetEvents(ctx, func(w int) corev1client.EventsGetter { return conns[w%len(conns)].client.CoreV1() }, len(f.names), !o.NoEvents)
	defer func() {
		cancel()
		wg.Wait()
		events.stop()
		for _, ch := range updates {
			for range ch {
			}
		}
		for _, m := range f.members {
			if m != nil {
				m.close()
			}
		}
	}()

	// The Node informer first: the status reporters and the kubelets'
	// admission read from it. Only this lab's nodes.
	factory := informers.NewSharedInformerFactoryWithOptions(watcher, 0,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.LabelSelector = labels.Set{node.LabLabel: o.Lab}.String()
		}))
	nodeLister := factory.Core().V1().Nodes().Lister()
	nodeInformer := factory.Core().V1().Nodes().Informer()
	wg.Go(func() { nodeInformer.RunWithContext(ctx) })
	getNode := func(_ context.Context, name string) (*v1.Node, error) { return nodeLister.Get(name) }

	// A pod watch per node, as each kubelet has: only that node's pods
	// (the field selector spec.nodeName=NAME), as that node (the Node
	// authorizer lets a node list and watch its own pods and no others),
	// on its group's connection. The apiserver sends each watcher only
	// its node's events (the pod registry's spec.nodeName trigger,
	// pkg/registry/core/pod/storage/storage.go:96, v1.36.3). One informer
	// for the whole fleet was one watcher carrying every pod's events: at
	// 25,000 pods the apiserver closed it as too slow, and until its list
	// of every pod came again — minutes, on an apiserver that was itself
	// the bottleneck — no node heard of a new or deleted pod (issue 23). A
	// node's watch lost now costs a list of its own few pods.
	updates = make(map[string]<-chan kubetypes.PodUpdate, len(f.names))
	for i, name := range f.names {
		updates[name] = podconfig.Watch(asNode(ctx, name), connOf(i).watches, name)
	}

	start := time.Now()
	f.members = make([]*member, len(f.names))
	for i, name := range f.names {
		m, err := newMember(f, f.first+i, name, connOf(i), updates[name], events.recorder(i, name), getNode)
		if err != nil {
			return err
		}
		f.members[i] = m
	}

	// Each node registers on its own: a place among RegisterParallelism
	// is held for one Node create at a time, never during a back-off, so
	// a node whose create keeps failing holds up no other. Its kubelet
	// starts after the first attempt, whatever its outcome — upstream's
	// Kubelet.Run does not wait for registration before its sync loop
	// either (pkg/kubelet/kubelet.go:1919-1924 and :1967, v1.36.3:
	// registration is retried in syncNodeStatus's goroutine,
	// kubelet_node_status.go:452-463, the loop runs beside it) — and it
	// reads its pod watch from the start. Its heartbeats (Lease, node
	// status) start once the Node exists. Nodes come up one after the
	// other, so their leases are spread over the registration rather than
	// renewed in one burst.
	f.log("registering %d nodes (%s … %s), %d at a time", len(f.names), f.names[0], f.names[len(f.names)-1], o.RegisterParallelism)
	places := make(chan struct{}, o.RegisterParallelism)
	var left atomic.Int64
	left.Store(int64(len(f.members)))
	for _, m := range f.members {
		wg.Go(func() {
			var once sync.Once
			kubelet := func() { once.Do(func() { wg.Go(func() { m.runKubelet(ctx) }) }) }
			if err := m.register(ctx, places, kubelet); err != nil {
				return // ctx ended
			}
			if left.Add(-1) == 0 && ctx.Err() == nil {
				f.log("%d nodes registered in %s; each runs its kubelet, PLEG, lease and status reporter", len(f.names), time.Since(start).Round(time.Millisecond))
				close(f.ready)
			}
			m.runHeartbeats(ctx, getNode)
		})
	}
	<-ctx.Done()
	f.log("stopping %d nodes", len(f.names))
	return nil
}

// nodeConn is a group of nodes' clients: client for pods, registration
// and events (rate-limited by QPS/Burst, one limiter for the whole fleet)
// and heartbeat for Leases and node status (no limit; a timeout, as the
// kubelet's heartbeat client) share one connection; watches, for the
// nodes' pod watches and their lists, has another.
type nodeConn struct {
	client    kubernetes.Interface
	heartbeat *heartbeatClient
	watches   kubernetes.Interface
}

// clients are the fleet's clients, all with cred: two connections for
// every NodesPerConnection nodes (their requests; their pod watches), and
// one for the Node informer (watcher).
func (f *Fleet) clients(cred *rest.Config) (conns []nodeConn, watcher kubernetes.Interface, err error) {
	o := f.o
	cfg := rest.CopyConfig(cred)
	cfg.UserAgent = "kubelet-labs-fleet"
	// Protobuf on the wire, as the kubelet's --kube-api-content-type
	// default (cmd/kubelet/app/server.go:1214-1224): cheaper to encode and
	// decode than JSON, for the apiserver and for us.
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	// No gzip (a departure: the kubelet's client asks for it, as Go's
	// transport does by default). The apiserver compresses any answer
	// over 128 KiB — here the Node informer's list of every node of the
	// fleet, and before each node watched its own pods, the fleet-wide
	// pod list (70 MB at 25,000 pods), compressed by the apiserver and
	// inflated here on the same two cores (issue 23: at 25,000 pods that
	// relist left every node without new pods for ten minutes, the
	// reading goroutine in gzip's inflate). The fleet and its apiserver
	// share a machine or a cluster network, where bytes are cheaper than
	// CPU.
	cfg.DisableCompression = true
	// Counted beneath the impersonation: a write refused before it is
	// sent (ErrNoNode) is no API call.
	if o.Calls != nil {
		o.Calls.Wrap(cfg)
	}
	if !o.SharedIdentity {
		impersonateNodes(cfg)
	}
	main := rest.CopyConfig(cfg)
	switch qps, burst := o.QPS, o.Burst; {
	case qps < 0:
		main.QPS = -1 // client-go: no rate limiter at all
	default:
		if qps == 0 { // client-go's default, as before the pool
			qps, burst = rest.DefaultQPS, rest.DefaultBurst
		}
		// One limiter for every connection: the limit is the fleet's.
		main.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	}
	leaseDur, _, _ := (lease.Config{LeaseDurationSeconds: o.LeaseDurationSeconds}).Durations()
	hbTimeout := min(o.StatusUpdateFrequency, leaseDur)

	// A connection per group of nodes: a dialer of its own is a transport
	// of its own in client-go's cache (transport/cache.go, tlsConfigKey,
	// keyed by the dial holder rest.TransportConfig makes for each
	// config with Dial set), and the group's pods and heartbeats share
	// it. On one connection for a thousand nodes, under load, the HTTP/2
	// ping went unanswered and the connection was dropped ("http2: client
	// connection lost", 168 times in one 25,000-pod run, issue 23): every
	// node's requests in flight failed at once.
	for first := 0; first < len(f.names); first += o.NodesPerConnection {
		g := ownConnection(main)
		rt, err := rest.TransportFor(g)
		if err != nil {
			return nil, nil, err
		}
		client, err := kubernetes.NewForConfigAndClient(g, &http.Client{Transport: rt})
		if err != nil {
			return nil, nil, err
		}
		heartbeat, err := newHeartbeatClient(g, &http.Client{Transport: rt, Timeout: hbTimeout}, !o.SharedIdentity)
		if err != nil {
			return nil, nil, err
		}
		// The group's pod watches on a connection of their own. The
		// apiserver allows 100 concurrent streams on a connection
		// (k8s.io/apiserver server/secure_serving.go:191-199, v0.36.3;
		// kube-apiserver sets no other), and a watch holds one for as long
		// as it runs: 100 nodes' watches filled their group's connection,
		// and every pod request and heartbeat then waited for Go's client
		// to dial and handshake another (80 status posts waiting in
		// net/http's getConn in one 25,000-pod run, issue 23).
		watches, err := kubernetes.NewForConfig(ownConnection(main))
		if err != nil {
			return nil, nil, err
		}
		conns = append(conns, nodeConn{client: client, heartbeat: heartbeat, watches: watches})
	}
	// The Node informer gets a connection of its own: the status
	// reporters of every node read it, and on a dropped connection its
	// watch would end with that group's requests.
	if watcher, err = kubernetes.NewForConfig(ownConnection(main)); err != nil {
		return nil, nil, err
	}
	return conns, watcher, nil
}

// ownConnection is a copy of c whose clients get a connection of their
// own: a dialer of its own is a transport of its own in client-go's
// transport cache (see clients).
func ownConnection(c *rest.Config) *rest.Config {
	c = rest.CopyConfig(c)
	c.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return c
}

// Groups is how many groups of nodes share connections: each group has
// one for its nodes' requests and one for their pod watches (the Node
// informer has one more).
func (f *Fleet) Groups() int {
	return (len(f.names) + f.o.NodesPerConnection - 1) / f.o.NodesPerConnection
}

// NodesPerConnection is how many nodes share each connection (the last
// may have fewer).
func (f *Fleet) NodesPerConnection() int { return f.o.NodesPerConnection }

// PodsByNode is how many pods each node has in its pod manager (nil
// until Ready).
func (f *Fleet) PodsByNode() map[string]int {
	select {
	case <-f.ready:
	default:
		return nil
	}
	n := make(map[string]int, len(f.members))
	for _, m := range f.members {
		n[m.name] = len(m.kubelet.Pods().GetPods())
	}
	return n
}

// Pods is how many pods the fleet's nodes have in their pod managers
// (0 until Ready): what the nodes were told to run.
func (f *Fleet) Pods() int {
	select {
	case <-f.ready:
	default:
		return 0
	}
	n := 0
	for _, m := range f.members {
		n += len(m.kubelet.Pods().GetPods())
	}
	return n
}
