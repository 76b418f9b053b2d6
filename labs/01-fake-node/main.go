// Lab 01 runs a fake node: the real kubelet (v1.36.3) in this process, with
// our mock CRI and fake cAdvisor at its edges. It bootstraps its own
// system:node:NAME certificate through a CSR, registers a Node that becomes
// Ready, renews its Lease, runs the pods bound to it, and serves their
// logs and exec to the apiserver.
//
//	go run ./labs/01-fake-node               # or ./boot.sh
//	kubectl apply -f yaml/nginx.yaml         # a pod with nodeName: fake-node-1
//	kubectl logs nginx; kubectl exec nginx -- echo hi
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/version"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labnames"
	"kubelet-labs/labs/01-fake-node/nodewatch"
	"kubelet-labs/labs/01-fake-node/servingcsr"
	"kubelet-labs/mycore/node"
	"kubelet-labs/mylib/fakenode"
)

type options struct {
	nodeName            string
	kubeconfig          string
	bootstrapKubeconfig string
	criEndpoint         string
	address             string
	port                int
	nodeIP              string
	leaseDuration       time.Duration
	maxPods             int
	cpus                int
	memory              string
	readyTimeout        time.Duration
	approveServe        bool
	clusterDNS          string // comma-separated IPs; "" is none, the kubelet's default
	clusterDomain       string
}

func main() {
	var o options
	labenv.Main(labenv.Lab{
		Name: "01-fake-node",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.nodeName, "node-name", labnames.Node01, "name of the Node (and of its certificate, system:node:NAME)")
			fs.StringVar(&o.kubeconfig, "kubeconfig", "", labenv.KubeconfigUsage)
			fs.StringVar(&o.bootstrapKubeconfig, "bootstrap-kubeconfig", "", "credentials the kubelet uses once for its TLS bootstrap, as a real kubelet's --bootstrap-kubeconfig: e.g. lab 03's bootstrap-token kubeconfig (the state folder's bootstrap/bootstrap-kubelet.kubeconfig); default: the --kubeconfig credentials")
			fs.StringVar(&o.criEndpoint, "cri-endpoint", "", "CRI runtime endpoint (unix:///…); default: start our mock CRI in-process")
			fs.StringVar(&o.address, "address", "", "address the kubelet server listens on (default: the node's InternalIP alone, where the apiserver dials it for logs/exec); 0.0.0.0 = all addresses, like a real kubelet; 127.0.0.1 = loopback only, and then kubectl logs/exec cannot reach it. Wherever: TLS, authenticated clients, webhook authorization, no anonymous access")
			fs.IntVar(&o.port, "port", 0, "kubelet server port (0 = a free port)")
			fs.StringVar(&o.nodeIP, "node-ip", "", "InternalIP the node reports, which the apiserver dials for logs/exec (default: --address when it is one address of this machine, else this machine's address on its route to the apiserver: the Docker bridge's on kind; when that route stays on loopback, as on lab 00, the default route's, as the kubelet detects it; loopback is refused)")
			fs.DurationVar(&o.leaseDuration, "lease-duration", 40*time.Second, "node Lease duration; the kubelet renews every quarter of it")
			fs.IntVar(&o.maxPods, "max-pods", 110, "pods this node accepts")
			fs.IntVar(&o.cpus, "cpus", 4, "CPUs of the fake machine")
			fs.StringVar(&o.memory, "memory", "8Gi", "memory of the fake machine")
			fs.DurationVar(&o.readyTimeout, "ready-timeout", 2*time.Minute, "give up if the node is not Ready by then")
			fs.BoolVar(&o.approveServe, "approve-serving-csr", true, "approve this node's kubelet-serving CSR with the --kubeconfig credentials (needed for kubectl logs/exec)")
			fs.StringVar(&o.clusterDNS, "cluster-dns", "", "comma-separated IPs of the cluster's DNS servers, e.g. 10.0.0.10: the only nameservers of pods with dnsPolicy ClusterFirst (the kubelet's clusterDNS; default none, as the kubelet's: those pods then get this machine's /etc/resolv.conf and a Warning event MissingClusterDNS)")
			fs.StringVar(&o.clusterDomain, "cluster-domain", "", "the cluster's DNS domain, e.g. cluster.local: ClusterFirst pods search NS.svc.DOMAIN svc.DOMAIN DOMAIN before this machine's search domains, and a pod with spec.subdomain is named in it in /etc/hosts (the kubelet's clusterDomain; default \"\", as the kubelet's; kubeadm and kind set cluster.local)")
		},
		Check: o.check,
		Run:   func(ctx context.Context, out *labenv.Printer) error { return run(ctx, o, out) },
	})
}

// check refuses a bad --cluster-dns or --cluster-domain before anything
// starts (exit 2, a usage error).
func (o *options) check() error {
	if _, err := o.clusterDNSIPs(); err != nil {
		return err
	}
	if d := o.clusterDomain; d != "" && len(validation.IsDNS1123Subdomain(d)) > 0 {
		return fmt.Errorf("--cluster-domain %q is not a DNS domain: lowercase letters, digits, '-' and '.', e.g. cluster.local", d)
	}
	return nil
}

// clusterDNSIPs is --cluster-dns as the kubelet's clusterDNS list, each
// entry parsed as the kubelet parses it (netutils.ParseIPSloppy,
// pkg/kubelet/kubelet.go:579-587) — but a bad one is an error here, where
// the kubelet logs it and goes on without it.
func (o *options) clusterDNSIPs() ([]string, error) {
	if o.clusterDNS == "" {
		return nil, nil
	}
	var ips []string
	for _, s := range strings.Split(o.clusterDNS, ",") {
		ip := netutils.ParseIPSloppy(strings.TrimSpace(s))
		if ip == nil {
			return nil, fmt.Errorf("--cluster-dns %q is not an IP address: want comma-separated IPs, e.g. 10.0.0.10", s)
		}
		ips = append(ips, ip.String())
	}
	return ips, nil
}

// run starts the node and follows it until Ctrl-C. The real kubelet has no
// way to stop (upstream runs it until the process ends), so its goroutines
// end with the program; ours — the serving CSR approver, the watches —
// are stopped and waited for before run returns.
func run(ctx context.Context, o options, out *labenv.Printer) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // before wg.Wait: it ends our goroutines

	// Checked before the name becomes a folder in the state folder.
	if err := labenv.CheckNodeName(o.nodeName); err != nil {
		return err
	}
	if o.kubeconfig == "" {
		var err error
		if o.kubeconfig, err = labenv.Kubeconfig(); err != nil {
			return err
		}
	}
	cluster, err := labenv.RESTConfig(ctx, o.kubeconfig)
	if err != nil {
		return err
	}
	mem, err := resource.ParseQuantity(o.memory)
	if err != nil {
		return fmt.Errorf("--memory %q: %w", o.memory, err)
	}
	if o.address != "" && net.ParseIP(o.address) == nil {
		return fmt.Errorf("--address %q is not an IP address (0.0.0.0 = all, 127.0.0.1 = loopback only)", o.address)
	}
	if ip := net.ParseIP(o.nodeIP); o.nodeIP != "" && (ip == nil || ip.IsLoopback() || ip.IsUnspecified()) {
		// the kubelet's validateNodeIP (pkg/kubelet/kubelet_node_status.go:714) refuses these
		return fmt.Errorf("--node-ip %q is not an address the node can publish: give one address of this machine, not loopback or 0.0.0.0", o.nodeIP)
	}
	// The node's address, unless the flags give it: this machine's
	// address on its route to the apiserver, which dials the node back
	// (mycore/node ChooseNodeIP: on kind, the Docker bridge's). The real
	// kubelet refuses a loopback node IP, so on lab 00, where that route
	// stays on loopback, it is the default route's, as the kubelet picks it.
	nodeIPNote := ""
	if o.nodeIP == "" && (o.address == "" || net.ParseIP(o.address).IsUnspecified()) {
		admin, err := kubernetes.NewForConfig(cluster)
		if err != nil {
			return err
		}
		c, err := node.ChooseNodeIP(ctx, admin, cluster.Host, false)
		if err != nil {
			return fmt.Errorf("cannot tell which address of this machine the apiserver can reach the node at: %v; give it with --node-ip", err)
		}
		o.nodeIP, nodeIPNote = c.IP.String(), "\n  node IP     "+c.String()
	}
	// Decided here, before the port: the port must be free where the
	// server will listen, and the output says where that is.
	o.address, o.nodeIP = fakenode.ListenAddress(o.address, o.nodeIP)
	if o.port == 0 {
		if o.port, err = freePort(o.address); err != nil {
			return err
		}
	} else if err := portFree(o.address, o.port); err != nil {
		return err
	}
	if o.bootstrapKubeconfig != "" {
		if _, err := labenv.Load(o.bootstrapKubeconfig); err != nil {
			return fmt.Errorf("--bootstrap-kubeconfig: %w", err)
		}
	}
	dir, err := labenv.NodeDir(o.nodeName)
	if err != nil {
		return err
	}
	// The kubelet's own log (klog, thousands of lines) goes to a file, so
	// the terminal shows only what the lab teaches. Not restored: the
	// kubelet logs until the process ends.
	logFile := filepath.Join(dir, "kubelet.log")
	if _, err := labenv.KlogToFile(logFile); err != nil {
		return err
	}
	defer klog.Flush()

	// The credentials for the kubelet's TLS bootstrap: a bootstrap token
	// (lab 03), as a joining node has, or else the cluster's own.
	bootstrapKubeconfig, removeBootstrap := o.bootstrapKubeconfig, func() {}
	if bootstrapKubeconfig == "" {
		if bootstrapKubeconfig, removeBootstrap, err = oneFile(o.kubeconfig, dir); err != nil {
			return err
		}
	}
	defer removeBootstrap()

	// The real kubelet, in this process, on our mock CRI.
	clusterDNS, _ := o.clusterDNSIPs() // check read it
	start := time.Now()
	node, err := fakenode.Start(ctx, fakenode.Config{
		NodeName: o.nodeName, Dir: dir, BootstrapKubeconfig: bootstrapKubeconfig, CRIEndpoint: o.criEndpoint,
		Address: o.address, Port: o.port, NodeIP: o.nodeIP, NodeLeaseDuration: o.leaseDuration, MaxPods: o.maxPods, CPUs: o.cpus, MemoryBytes: uint64(mem.Value()),
		ClusterDNS: clusterDNS, ClusterDomain: o.clusterDomain,
	})
	var running *fakenode.AlreadyRunningError
	if errors.As(err, &running) {
		// the library says what is wrong; how to name another node is this lab's
		return fmt.Errorf("%w (NODE_NAME=… ./boot.sh, --node-name)", err)
	}
	if err != nil {
		return err
	}
	defer node.Stop()
	cfg := node.Config()
	runtime := cfg.CRIEndpoint
	if node.CRI() != nil {
		runtime = node.CRI().Endpoint() + " (our mock CRI)"
	}
	out.Printf("node %s: the real kubelet %s is starting\n  runtime     %s\n  kubelet log %s\n  bootstrap   %s%s\n  server      https://%s%s",
		o.nodeName, kubeletVersion(), runtime, logFile, bootstrapKubeconfig, nodeIPNote, net.JoinHostPort(o.address, fmt.Sprint(o.port)), listenNote(o.address, o.nodeIP))

	// Its serving certificate needs someone to approve it: we do, as admin.
	if o.approveServe {
		wg.Go(func() { servingcsr.Approve(ctx, cluster, o.nodeName, out) })
	}

	// TLS bootstrap → Node registered → Ready, as seen from outside.
	w := nodewatch.New(out, o.nodeName, start)
	ready := make(chan error, 1)
	wg.Go(func() { ready <- w.WaitReady(ctx, cfg, o.readyTimeout) })
	select {
	case err := <-ready:
		if ctx.Err() != nil {
			return stopped(out, o.nodeName) // Ctrl-C before the node was Ready
		}
		if err != nil {
			return fmt.Errorf("%w (kubelet log: %s)", err, logFile)
		}
	case err := <-node.Err():
		if ctx.Err() != nil {
			return stopped(out, o.nodeName)
		}
		return kubeletFailed(err, logFile)
	}

	removeBootstrap() // used once: the node has its own certificate now
	out.Printf("\npods bound to %s appear below; try:\n  kubectl apply -f yaml/nginx.yaml\n  kubectl get pods -o wide\n  kubectl logs nginx\n  kubectl exec nginx -- echo hi\n  kubectl delete -f yaml/nginx.yaml\nPress Ctrl-C to stop the node.\n", o.nodeName)
	watchErr := make(chan error, 1)
	wg.Go(func() { watchErr <- w.WatchPods(ctx, cfg) })

	select {
	case <-ctx.Done():
		return stopped(out, o.nodeName)
	case err := <-watchErr:
		return err // the node's kubeconfig is unreadable; nil only after ctx ended
	case err := <-node.Err():
		if ctx.Err() != nil {
			return stopped(out, o.nodeName)
		}
		return kubeletFailed(err, logFile)
	}
}

// stopped is a clean end on Ctrl-C (or SIGTERM), at any moment: exit 0.
func stopped(out *labenv.Printer, nodeName string) error {
	out.Printf("\nstopping %s. If it registered, the Node object stays and turns NotReady after the grace period; remove it with: kubectl delete node %s", nodeName, nodeName)
	return nil
}

// oneFile returns kubeconfig as the one file the kubelet reads. A
// KUBECONFIG list (a:b, merged as kubectl merges it) is written flattened
// to a private file in dir, removed by the returned func.
func oneFile(kubeconfig, dir string) (string, func(), error) {
	if len(filepath.SplitList(kubeconfig)) < 2 {
		return kubeconfig, func() {}, nil
	}
	f, err := os.CreateTemp(dir, "merged-*.kubeconfig")
	if err != nil {
		return "", nil, err
	}
	f.Close()
	remove := func() { os.Remove(f.Name()) }
	if err := labenv.WriteFlat(kubeconfig, f.Name()); err != nil {
		remove()
		return "", nil, err
	}
	return f.Name(), remove, nil
}

// kubeletVersion is what the Node will report. Release builds stamp it with
// -ldflags -X (upstream hack/lib/version.sh); `go run` cannot, so it shows
// v0.0.0-master — boot.sh builds with the stamp.
func kubeletVersion() string { return version.Get().GitVersion }

func kubeletFailed(err error, logFile string) error {
	if err == nil {
		err = errors.New("stopped")
	}
	return fmt.Errorf("the kubelet exited: %w (kubelet log: %s)", err, logFile)
}

// listenNote says what the listen address means for kubectl logs/exec.
func listenNote(address, nodeIP string) string {
	ip := net.ParseIP(address)
	switch {
	case ip == nil:
		return ""
	case ip.IsLoopback():
		return " (loopback only: kubectl logs/exec through the apiserver cannot reach it)"
	case ip.IsUnspecified():
		return " (all addresses, like a real kubelet)"
	case address == nodeIP:
		return " (the node's InternalIP only: where the apiserver dials it)"
	}
	return ""
}

func freePort(address string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(address, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func portFree(address string, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(address, fmt.Sprint(port)))
	if err != nil {
		return fmt.Errorf("--port %d is not usable on %s (%v); pick another, or 0 for a free one", port, address, err)
	}
	return l.Close()
}
