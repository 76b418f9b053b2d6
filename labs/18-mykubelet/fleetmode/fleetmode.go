// Package fleetmode is lab 18's --nodes N: N of our nodes (mycore/fleet)
// in one process, each with its own kubelet on its own mock runtime, all
// sharing one credential and a few connections to the apiserver. It prints
// what a learner watches (a summary every few seconds, every API call by
// verb, resource and code at the end), and sets what is process-wide: the
// garbage collector, the profiler, the klog logger the nodes share.
package fleetmode

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/state"
	"kubelet-labs/mycore/fleet"
	"kubelet-labs/mycore/lease"
	"kubelet-labs/mycore/node"
)

// Options are the flags of fleet mode: --nodes N runs N of our nodes in
// this process, each on its own mock runtime.
type Options struct {
	// Kubeconfig (admin) and RelistPeriod are the lab's flags, shared with
	// the single node; the rest are fleet mode's own (Register). The
	// fleet uses the kubeconfig once, at start, to make its own narrow
	// identity (mycore/fleet, Identity), unless --shared-identity.
	Kubeconfig   string
	RelistPeriod time.Duration
	// View is the live view's address (the lab's --view); "" or "off":
	// none.
	View string
	// ClusterDNS and ClusterDomain are the lab's --cluster-dns and
	// --cluster-domain, every node's (mycore/fleet Options).
	ClusterDNS    []net.IP
	ClusterDomain string

	Nodes        int
	shard        string
	prefix       string
	qps          float64
	burst        int
	leaseSeconds int
	statusEvery  time.Duration
	every        time.Duration
	logNode      string
	statsFile    string
	sharedID     bool
	pprofAddr    string
	memoryLimit  string
	gcPercent    int
	events       bool
	perConn      int
	statusWrites int

	// flags and own: the flag set Register added to, and the names it
	// added, so that one of them set without --nodes is refused (OnlyWithNodes).
	flags *flag.FlagSet
	own   map[string]bool
}

// Register adds fleet mode's flags to fs: --nodes and those that only
// fleet mode reads.
func (o *Options) Register(fs *flag.FlagSet) {
	before := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { before[f.Name] = true })
	defer func() {
		o.flags, o.own = fs, map[string]bool{}
		fs.VisitAll(func(f *flag.Flag) {
			if !before[f.Name] {
				o.own[f.Name] = true
			}
		})
	}()
	fs.IntVar(&o.Nodes, "nodes", 0, fmt.Sprintf("fleet mode: run this many nodes (1-%d) in this process on the mock runtime", fleet.MaxNodes))
	fs.StringVar(&o.shard, "shard", "", "run shard I of N of one fleet, as I/N (e.g. 0/3): this process runs nodes I×NODES to (I+1)×NODES−1 and their pods; every shard gets the same --nodes and --node-prefix, and a shard restarted with the same I takes its nodes back")
	fs.StringVar(&o.prefix, "node-prefix", fleet.DefaultPrefix, "fleet node names are PREFIX-0000, PREFIX-0001, …")
	fs.Float64Var(&o.qps, "kube-api-qps", -1, "client-side rate limit of the fleet's shared client for pods and registration; negative: none (KWOK v0.7.0 has none either). Leases and node status are never limited")
	fs.IntVar(&o.burst, "kube-api-burst", 400, "burst of that rate limit (with --kube-api-qps > 0)")
	fs.IntVar(&o.leaseSeconds, "node-lease-duration-seconds", lease.DefaultLeaseDurationSeconds, "each node's Lease duration; renewed every quarter of it (kubelet: 40)")
	fs.DurationVar(&o.statusEvery, "node-status-update-frequency", node.DefaultStatusUpdateFrequency, "how often each node checks its status (written only when it changed, or every 5m) (kubelet: 10s)")
	fs.DurationVar(&o.every, "report-every", 10*time.Second, "print a summary line this often (0: never)")
	fs.StringVar(&o.logNode, "log-node", "", "print the step-by-step log of this node's kubelet (e.g. mykubelet-0000)")
	fs.BoolVar(&o.sharedID, "shared-identity", false, "every node acts as the kubeconfig's own user, as KWOK does (default: the kubeconfig is used once, to make the fleet's own identity "+fleet.IdentityUser+", which may only impersonate the fleet's nodes and list and watch nodes; each node impersonates system:node:NAME, so the Node authorizer, NodeRestriction and priority and fairness treat it as a kubelet)")
	fs.BoolVar(&o.events, "events", true, "each node records the kubelet's events (Pulling, Pulled, Created, Started, Killing…), written as the node through "+fmt.Sprint(fleet.EventWriters)+" shared writers; false: none, as KWOK's default stages (a departure from the kubelet, for measuring what events cost)")
	fs.IntVar(&o.gcPercent, "gc-percent", 50, "Go's GOGC for this process: a collection starts once the heap has grown this many percent over what was live after the last one (Go's default: 100); 0 or a GOGC environment variable: leave Go's setting")
	fs.StringVar(&o.memoryLimit, "memory-limit", "none", "a soft limit for the process's Go memory, as GOMEMLIMIT (e.g. 900Mi): near it the collector runs more often; none: no limit (or GOMEMLIMIT's, if set)")
	fs.IntVar(&o.perConn, "nodes-per-connection", fleet.DefaultNodesPerConnection, "nodes whose requests (pods, leases, node status, events) share one HTTP/2 connection to the apiserver, and whose pod watches share another; the Node informer has one of its own (a kubelet has its own connection)")
	fs.IntVar(&o.statusWrites, "status-writes", fleet.DefaultStatusWrites, "pod status writes (PATCH, the final DELETE) of all nodes in flight at once; a node waits for a turn, then posts the newest status it has, so a status that changed while it waited is written once")
	fs.StringVar(&o.pprofAddr, "pprof-addr", "", "serve Go's profiler (net/http/pprof) on this loopback address, e.g. 127.0.0.1:6060: where a thousand kubelets spend CPU and memory")
	fs.StringVar(&o.statsFile, "stats-file", "", "on exit, write the fleet's API calls (by verb, resource, code) to this JSON file")
}

// OnlyWithNodes refuses a flag of fleet mode given without --nodes: the
// single node would run and ignore it, and the learner who typed
// --status-writes -1 would never learn it did nothing.
func (o *Options) OnlyWithNodes() error {
	if o.flags == nil || o.Nodes != 0 {
		return nil
	}
	var err error
	o.flags.Visit(func(f *flag.Flag) {
		if err == nil && o.own[f.Name] && f.Name != "nodes" {
			err = fmt.Errorf("--%s is a flag of fleet mode: add --nodes N (without it the lab runs one node, which has no use for it)", f.Name)
		}
	})
	return err
}

// Stats is what --stats-file holds.
type Stats struct {
	Nodes  int               `json:"nodes"`
	Total  int64             `json:"total"`
	Wasted fleet.Wasted      `json:"wasted"`
	Calls  []fleet.CallCount `json:"calls"`
}

// Run runs the fleet until ctx ends, then prints (and with --stats-file
// writes) every API call it made. onReady, if set, is called once every
// node is Ready with a Lease.
func Run(ctx context.Context, o Options, out *labenv.Printer, onReady func(*fleet.Fleet)) error {
	if o.Nodes < 1 || o.Nodes > fleet.MaxNodes {
		return fmt.Errorf("--nodes %d: must be 1 to %d", o.Nodes, fleet.MaxNodes)
	}
	if o.RelistPeriod <= 0 || o.statusEvery <= 0 || o.every < 0 || (o.qps > 0 && o.burst < 1) {
		return errors.New("--relist-period and --node-status-update-frequency must be positive, --report-every not negative, --kube-api-burst at least 1")
	}
	if o.statusWrites < 0 {
		return fmt.Errorf("--status-writes %d: must be at least 1 (0: the default, %d)", o.statusWrites, fleet.DefaultStatusWrites)
	}
	if o.perConn < 0 {
		return fmt.Errorf("--nodes-per-connection %d: must be at least 1 (0: the default, %d)", o.perConn, fleet.DefaultNodesPerConnection)
	}
	if err := labenv.CheckNodeName(fleet.NodeName(o.prefix, 0)); err != nil {
		return fmt.Errorf("--node-prefix %q: %w", o.prefix, err)
	}
	shard, shards, err := ParseShard(o.shard)
	if err == nil {
		err = fleet.CheckShard(shard, shards, o.Nodes)
	}
	if err != nil {
		return err
	}
	gcPercent, memLimit, gcWhy, err := o.gcSettings()
	if err != nil {
		return err
	}
	// Process-wide; restored when we return (tests run in one process).
	if gcPercent > 0 {
		old := debug.SetGCPercent(gcPercent)
		defer debug.SetGCPercent(old)
	}
	if memLimit > 0 {
		old := debug.SetMemoryLimit(memLimit)
		defer debug.SetMemoryLimit(old)
	}
	if o.pprofAddr != "" {
		url, stopProfiler, err := serveProfiler(o.pprofAddr)
		if err != nil {
			return err
		}
		defer stopProfiler()
		out.Printf("profiler on %s (go tool pprof %sheap; the path is its password)", url, url)
	}
	cfg, err := labenv.RESTConfig(ctx, o.Kubeconfig)
	if err != nil {
		return err
	}
	base, err := state.Ensure("fleet")
	if err != nil {
		return err
	}
	dir, err := newRunDir(base)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	calls := fleet.NewCalls()
	fo := fleet.Options{
		Config: cfg, Nodes: o.Nodes, Shard: shard, Shards: shards, Prefix: o.prefix, QPS: float32(o.qps), Burst: o.burst, Dir: dir,
		LeaseDurationSeconds: int32(o.leaseSeconds), StatusUpdateFrequency: o.statusEvery, RelistPeriod: o.RelistPeriod,
		SharedIdentity: o.sharedID, NoEvents: !o.events, NodesPerConnection: o.perConn, StatusWrites: o.statusWrites, Calls: calls, Log: func(f string, a ...any) { out.Printf("fleet   "+f, a...) },
		ClusterDNS: o.ClusterDNS, ClusterDomain: o.ClusterDomain,
	}
	if o.logNode != "" {
		fo.NodeLog = func(name string) func(string, ...any) {
			if name != o.logNode {
				return nil
			}
			return func(f string, a ...any) { out.Stamped(name+" "+f, a...) }
		}
	}
	f, err := fleet.New(fo)
	if err != nil {
		return err
	}
	// The live view's port before any node registers (a port in use
	// stops us here); its grid fills as the nodes come up.
	if o.View != "" && o.View != "off" {
		stopView, err := serveView(ctx, o.View, cfg, f, calls, out)
		if err != nil {
			return err
		}
		defer stopView()
	}
	limit := "no client-side rate limit"
	if o.qps > 0 {
		limit = fmt.Sprintf("client QPS %g, burst %d", o.qps, o.burst)
	}
	names := f.Names()
	ofShards := ""
	if shards > 0 {
		ofShards = fmt.Sprintf(", shard %d of %d (the others run nodes of their own)", shard, shards)
	}
	out.Printf("fleet mode: %d nodes (%s … %s) in this process%s, each with its own kubelet, PLEG (relist %s) and mock runtime", o.Nodes, names[0], names[len(names)-1], ofShards, o.RelistPeriod)
	out.Printf("memory: %s", gcWhy)
	who := "each node impersonates system:node:NAME (checked and queued by the apiserver as a kubelet)"
	if o.sharedID {
		who = "every node acts as the kubeconfig's own user (no per-node checks)"
	}
	conns := "1 for the nodes' requests, 1 for their pod watches"
	if n := f.Groups(); n > 1 {
		conns = fmt.Sprintf("%d for the nodes' requests and %d for their pod watches, up to %d nodes on each", n, n, f.NodesPerConnection())
	}
	out.Printf("one credential for all; connections to %s: %s, 1 for the Node informer; %s: %s for pods, none for leases and node status", cfg.Host, conns, who, limit)
	out.Printf("pods bound to them run on the mock. Try, in another terminal:")
	out.Printf("  kubectl get nodes -l %s=18-mykubelet", node.LabLabel)
	out.Printf("  kubectl run hello --image=busybox --overrides='{\"spec\":{\"nodeName\":\"%s\"}}' -- sleep 3600", names[0])

	// Every node's lease controller logs through its context: give the
	// fleet a logger that goes quiet once we stop, or a thousand nodes log
	// that their last renewal was cancelled — lines that say nothing.
	// (Not klog.SetLogger: swapping the global logger while goroutines log
	// is a data race.)
	ctx, stopping := quietOnStop(ctx)
	start := time.Now()
	errc := make(chan error, 1)
	go func() { errc <- f.Run(ctx) }()
	select {
	case <-f.Ready():
		out.Printf("ready   %d nodes Ready with leases %s after start", o.Nodes, time.Since(start).Round(time.Millisecond))
		if onReady != nil {
			onReady(f)
		}
	case err := <-errc:
		return err
	}

	var tick <-chan time.Time
	if o.every > 0 {
		t := time.NewTicker(o.every)
		defer t.Stop()
		tick = t.C
	}
	done := ctx.Done()
	var runErr error
loop:
	for {
		select {
		case <-done:
			stopping()
			done = nil
		case <-tick:
			counts := calls.Counts()
			wasted := fleet.WastedOf(counts)
			out.Printf("summary %d nodes, %d pods in their pod managers; %d API calls so far (deletes of gone objects %d, conflicts %d)",
				o.Nodes, f.Pods(), fleet.Total(counts), wasted.DeletesOfGone, wasted.Conflicts)
		case runErr = <-errc:
			break loop
		}
	}

	counts := calls.Counts()
	stats := Stats{Nodes: o.Nodes, Total: fleet.Total(counts), Wasted: fleet.WastedOf(counts), Calls: counts}
	out.Printf("stopped after %s: %d API calls, by verb, resource and code:", time.Since(start).Round(time.Second), stats.Total)
	for _, c := range counts {
		out.Printf("  %s", c)
	}
	out.Printf("wasted: %d deletes of objects already gone, %d conflicts", stats.Wasted.DeletesOfGone, stats.Wasted.Conflicts)
	out.Printf("the Nodes and their Leases stay (NotReady once the leases expire); remove them with: kubectl delete nodes -l %s=18-mykubelet", node.LabLabel)
	if o.statsFile != "" {
		b, err := json.MarshalIndent(stats, "", "  ")
		if err == nil {
			err = os.WriteFile(o.statsFile, append(b, '\n'), 0o644)
		}
		if err != nil {
			return errors.Join(runErr, fmt.Errorf("--stats-file: %w", err))
		}
	}
	return runErr
}

// ParseShard reads --shard I/N: "" is no shards (0, 0).
func ParseShard(s string) (shard, shards int, err error) {
	if s == "" {
		return 0, 0, nil
	}
	i, n, ok := strings.Cut(s, "/")
	shard, err1 := strconv.Atoi(i)
	shards, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil || shards < 1 || shards > 100 || shard < 0 || shard >= shards {
		return 0, 0, fmt.Errorf("--shard %q: want I/N with 0 ≤ I < N ≤ 100, e.g. 0/3", s)
	}
	return shard, shards, nil
}

// gcSettings are the garbage collector's settings in fleet mode (0: leave
// Go's), and a line that says which. They are process-wide, as every
// node's memory is the process's. A thousand nodes with ten pods each keep
// about 0.5 GB live: every pod as its node's watch decoded it, the pod config, the
// pod manager, the status manager, the pod cache and the mock runtime,
// plus a pod worker goroutine each and each PLEG's relist in flight. With
// Go's default (GOGC=100) the heap grows to twice what is live before a
// collection: 1.2-1.3 GB peak RSS measured at 1,000 nodes and 10,000 pods.
// GOGC=50 lets it grow half as far, for more frequent collections; unlike
// a memory limit it has no cliff: when more is live (more pods per node, a
// slow apiserver holding requests in flight) the heap grows with it
// instead of the collector running back to back.
func (o Options) gcSettings() (gcPercent int, memLimit int64, why string, err error) {
	switch {
	case o.gcPercent < 0:
		return 0, 0, "", fmt.Errorf("--gc-percent %d: want 0 (Go's setting) or more", o.gcPercent)
	case os.Getenv("GOGC") != "":
		why = "GOGC=" + os.Getenv("GOGC") + " (from the environment)"
	case o.gcPercent > 0:
		gcPercent = o.gcPercent
		why = fmt.Sprintf("GOGC=%d: the heap may grow %d%% over what is live before a collection (Go's default: 100%%; --gc-percent)", o.gcPercent, o.gcPercent)
	default:
		why = "Go's garbage collector settings"
	}
	switch o.memoryLimit {
	case "", "none":
	default:
		q, err := resource.ParseQuantity(o.memoryLimit)
		if err != nil || q.Value() < 64<<20 {
			return 0, 0, "", fmt.Errorf("--memory-limit %q: want none or a size of at least 64Mi, e.g. 900Mi", o.memoryLimit)
		}
		memLimit = q.Value()
		why += fmt.Sprintf("; soft memory limit %s (--memory-limit)", o.memoryLimit)
	}
	return gcPercent, memLimit, why, nil
}

// serveProfiler serves net/http/pprof on a loopback address, under a
// secret path: http://127.0.0.1:PORT/SECRET/debug/pprof/ is the URL it
// returns. A heap profile holds what the process holds (tokens, keys,
// pods), and loopback is every local user's: the secret is the
// authentication. It is a path prefix, not a ?token= or a bearer header,
// because that is what works with `go tool pprof URL` unchanged: the tool
// takes a URL but sets no header, and for the symbol table it asks
// path/../symbol with the query dropped (google/pprof, vendored in Go's
// cmd/vendor: internal/symbolz/symbolz.go:86-99), which keeps a path
// prefix. The Host header
// must name this server (127.0.0.1, localhost or [::1] with its port): a
// web page whose name resolves to 127.0.0.1 (DNS rebinding) is refused
// even if it learned the path.
func serveProfiler(addr string) (url string, stop func(), err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", nil, fmt.Errorf("--pprof-addr %q: %w", addr, err)
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return "", nil, fmt.Errorf("--pprof-addr %q: only a loopback address (127.0.0.1:PORT): anyone who can reach the profiler can read the process's memory", addr)
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", nil, err
	}
	secret := base64.RawURLEncoding.EncodeToString(b)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("--pprof-addr: %w", err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	hosts := map[string]bool{}
	for _, h := range []string{ip.String(), "127.0.0.1", "localhost", "::1"} {
		hosts[net.JoinHostPort(h, port)] = true
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	profiles := http.StripPrefix("/"+secret, mux)
	guard := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hosts[r.Host] {
			http.Error(w, "profiler: unknown Host "+r.Host+"; use the URL the fleet printed", http.StatusMisdirectedRequest)
			return
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		if subtle.ConstantTimeCompare([]byte(first), []byte(secret)) != 1 {
			http.Error(w, "profiler: use the URL the fleet printed (its path starts with a secret)", http.StatusForbidden)
			return
		}
		profiles.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: guard, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return "http://" + net.JoinHostPort(ip.String(), port) + "/" + secret + "/debug/pprof/", func() { _ = srv.Close() }, nil
}

// quietOnStop returns ctx carrying a logger that drops everything once
// stopping is called.
func quietOnStop(ctx context.Context) (_ context.Context, stopping func()) {
	quiet := new(atomic.Bool)
	base := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(os.Stderr)))
	return klog.NewContext(ctx, logr.New(quietSink{LogSink: base.GetSink(), quiet: quiet})), func() { quiet.Store(true) }
}

type quietSink struct {
	logr.LogSink
	quiet *atomic.Bool
}

func (s quietSink) Enabled(level int) bool { return !s.quiet.Load() && s.LogSink.Enabled(level) }
func (s quietSink) Info(level int, msg string, kv ...any) {
	if !s.quiet.Load() {
		s.LogSink.Info(level, msg, kv...)
	}
}
func (s quietSink) Error(err error, msg string, kv ...any) {
	if !s.quiet.Load() {
		s.LogSink.Error(err, msg, kv...)
	}
}
func (s quietSink) WithValues(kv ...any) logr.LogSink {
	return quietSink{LogSink: s.LogSink.WithValues(kv...), quiet: s.quiet}
}
func (s quietSink) WithName(name string) logr.LogSink {
	return quietSink{LogSink: s.LogSink.WithName(name), quiet: s.quiet}
}
