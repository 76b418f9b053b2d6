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
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/version"
	"k8s.io/klog/v2"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/state"
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
}

func main() {
	var o options
	flag.StringVar(&o.nodeName, "node-name", "fake-node-1", "name of the Node (and of its certificate, system:node:NAME)")
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "the cluster, as kubectl uses it (default $KUBECONFIG — a file or a list — else the state folder's admin.kubeconfig): checks the cluster answers, approves the serving CSR, and bootstraps the node unless --bootstrap-kubeconfig is given")
	flag.StringVar(&o.bootstrapKubeconfig, "bootstrap-kubeconfig", "", "credentials the kubelet uses once for its TLS bootstrap, as a real kubelet's --bootstrap-kubeconfig: e.g. lab 03's bootstrap-token kubeconfig (the state folder's bootstrap/bootstrap-kubelet.kubeconfig); default: the --kubeconfig credentials")
	flag.StringVar(&o.criEndpoint, "cri-endpoint", "", "CRI runtime endpoint (unix:///…); default: start our mock CRI in-process")
	flag.StringVar(&o.address, "address", fakenode.DefaultAddress, "address the kubelet server listens on: all addresses, like a real kubelet (TLS, authenticated clients, webhook authorization, no anonymous access); 127.0.0.1 keeps it on loopback, and then kubectl logs/exec cannot reach it")
	flag.IntVar(&o.port, "port", 0, "kubelet server port (0 = a free port)")
	flag.StringVar(&o.nodeIP, "node-ip", "", "InternalIP the node reports (default: the kubelet detects the host's address; loopback is refused)")
	flag.DurationVar(&o.leaseDuration, "lease-duration", 40*time.Second, "node Lease duration; the kubelet renews every quarter of it")
	flag.IntVar(&o.maxPods, "max-pods", 110, "pods this node accepts")
	flag.IntVar(&o.cpus, "cpus", 4, "CPUs of the fake machine")
	flag.StringVar(&o.memory, "memory", "8Gi", "memory of the fake machine")
	flag.DurationVar(&o.readyTimeout, "ready-timeout", 2*time.Minute, "give up if the node is not Ready by then")
	flag.BoolVar(&o.approveServe, "approve-serving-csr", true, "approve this node's kubelet-serving CSR with the --kubeconfig credentials (needed for kubectl logs/exec)")
	flag.Parse()
	if err := run(o); err != nil {
		labenv.Fatal(err)
	}
}

func run(o options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

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
	if net.ParseIP(o.address) == nil {
		return fmt.Errorf("--address %q is not an IP address (0.0.0.0 = all, 127.0.0.1 = loopback only)", o.address)
	}
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
	dir, err := state.Ensure("nodes", o.nodeName)
	if err != nil {
		return err
	}
	logFile := filepath.Join(dir, "kubelet.log")
	if err := logToFile(logFile); err != nil {
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

	start := time.Now()
	node, err := fakenode.Start(ctx, fakenode.Config{
		NodeName: o.nodeName, Dir: dir, BootstrapKubeconfig: bootstrapKubeconfig, CRIEndpoint: o.criEndpoint,
		Address: o.address, Port: o.port, NodeIP: o.nodeIP, NodeLeaseDuration: o.leaseDuration, MaxPods: o.maxPods, CPUs: o.cpus, MemoryBytes: uint64(mem.Value()),
	})
	if err != nil {
		return err
	}
	defer node.Stop()
	cfg := node.Config()
	runtime := cfg.CRIEndpoint
	if node.CRI() != nil {
		runtime = node.CRI().Endpoint() + " (our mock CRI)"
	}
	fmt.Printf("node %s: the real kubelet %s is starting\n  runtime     %s\n  kubelet log %s\n  bootstrap   %s\n  server      https://%s%s\n",
		o.nodeName, kubeletVersion(), runtime, logFile, bootstrapKubeconfig, net.JoinHostPort(o.address, fmt.Sprint(o.port)), listenNote(o.address))

	if o.approveServe {
		go approveServingCSRs(ctx, cluster, o.nodeName)
	}

	w := &watcher{nodeName: o.nodeName, start: start}
	ready := make(chan error, 1)
	go func() { ready <- w.waitReady(ctx, cfg, o.readyTimeout) }()

	select {
	case err := <-ready:
		if ctx.Err() != nil {
			return stopped(o.nodeName) // Ctrl-C before the node was Ready
		}
		if err != nil {
			return fmt.Errorf("%w (kubelet log: %s)", err, logFile)
		}
	case err := <-node.Err():
		if ctx.Err() != nil {
			return stopped(o.nodeName)
		}
		return kubeletFailed(err, logFile)
	}

	removeBootstrap() // used once: the node has its own certificate now
	fmt.Printf("\npods bound to %s appear below; try:\n  kubectl apply -f yaml/nginx.yaml\n  kubectl get pods -o wide\n  kubectl logs nginx\n  kubectl exec nginx -- echo hi\n  kubectl delete -f yaml/nginx.yaml\nPress Ctrl-C to stop the node.\n\n", o.nodeName)
	client, err := nodeClient(cfg)
	if err != nil {
		return err
	}
	go w.watchPods(ctx, client)

	select {
	case <-ctx.Done():
		return stopped(o.nodeName)
	case err := <-node.Err():
		if ctx.Err() != nil {
			return stopped(o.nodeName)
		}
		return kubeletFailed(err, logFile)
	}
}

// stopped is a clean end on Ctrl-C (or SIGTERM), at any moment: exit 0.
func stopped(nodeName string) error {
	fmt.Printf("\nstopping %s. If it registered, the Node object stays and turns NotReady after the grace period; remove it with: kubectl delete node %s\n", nodeName, nodeName)
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

// nodeClient uses the node's own credentials, written by the TLS bootstrap.
func nodeClient(cfg fakenode.Config) (kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig())
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(rc)
}

// logToFile sends the kubelet's klog output (thousands of lines) to a file,
// so the terminal shows only what the lab teaches.
func logToFile(path string) error {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	for k, v := range map[string]string{"logtostderr": "false", "alsologtostderr": "false", "log_file": path, "one_output": "true", "stderrthreshold": "FATAL"} {
		if err := fs.Set(k, v); err != nil {
			return err
		}
	}
	return nil
}

// listenNote says what the listen address means for kubectl logs/exec.
func listenNote(address string) string {
	if ip := net.ParseIP(address); ip != nil && ip.IsLoopback() {
		return " (loopback only: kubectl logs/exec through the apiserver cannot reach it)"
	}
	if ip := net.ParseIP(address); ip != nil && ip.IsUnspecified() {
		return " (all addresses, like a real kubelet)"
	}
	return ""
}

// reachableAt is where the apiserver connects for logs and exec: the
// node's InternalIP (--kubelet-preferred-address-types) and its port.
func reachableAt(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return net.JoinHostPort(a.Address, fmt.Sprint(n.Status.DaemonEndpoints.KubeletEndpoint.Port))
		}
	}
	return "(no InternalIP)"
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
