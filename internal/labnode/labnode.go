// Package labnode starts a whole node of our own — the node server of lab 14
// in front of the kubelet of labs 07-17 — in the order a kubelet starts:
//
//  1. what can fail on this machine, before anything is registered: the
//     cluster answers, the server's port is free (the Node publishes it),
//     the runtime is there;
//  2. the join (labs 03-05, mycore/node): bootstrap token → CSR → a client
//     certificate for system:node:NAME → the Node with our address, port
//     and declared features → the Lease;
//  3. the serving certificate (lab 14): a kubernetes.io/kubelet-serving CSR
//     as the node, with the node's IP in it, checked and approved as admin
//     (nothing in a cluster approves those on its own);
//  4. the kubelet (mycore/mykubelet): pod sources, pod manager, pod workers,
//     PLEG, probes, status manager;
//  5. the node server (mycore/server): exec, attach, logs, port-forward,
//     authenticated by client certificate and authorized by
//     SubjectAccessReview.
//
// Run then runs the kubelet's sync loop and the server side by side, as the
// real kubelet does (v1.36.3, cmd/kubelet/app/server.go): run gets the
// client certificate first (buildKubeletClientConfig :712, :963-1060), then
// RunKubelet :1234 → startKubelet :1290-1303 starts Run (the sync loop) and
// ListenAndServe (the server) in goroutines of their own.
//
// Labs 14 (kubectl exec into our node) and 18 (our whole kubelet) start
// their node here; it is named labnode so it is not taken for upstream's
// pkg/kubelet or our own mycore/node, which is only step 2.
package labnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/kubernetes"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/mycore/bootstrap"
	"kubelet-labs/mycore/mykubelet"
	"kubelet-labs/mycore/node"
	"kubelet-labs/mycore/server"
	"kubelet-labs/mylib/fakecri"
)

// Options describe the node to start.
type Options struct {
	// Lab is the lab's folder name, e.g. "14-exec": the Node's
	// kubelet-labs.dev/lab-node label.
	Lab string
	// Name of the node; its folder in the state folder is nodes/Name.
	Name string
	// Kubeconfig is the admin kubeconfig ("" = labenv's default): it makes
	// the bootstrap token and approves the serving CSR.
	Kubeconfig string
	// Token "ID.SECRET" to join with (e.g. lab 03's); "": a new one.
	Token string
	// Address the server listens on; NodeIP the InternalIP the Node
	// publishes, which the apiserver dials ("" = Address, or this
	// machine's address when Address is 0.0.0.0).
	Address, NodeIP string
	// Port of the server (0 picks a free one).
	Port int
	// Runtime says which runtime to open (labruntime's flags).
	Runtime labruntime.Flags
	// WebSockets: declare ExtendWebSocketsToKubelet in the Node's status
	// and serve WebSocket v5, as a 1.36 kubelet does.
	WebSockets bool
	// UnauthorizedTTL: how long a denied SubjectAccessReview is cached
	// (0: the kubelet's 30 s).
	UnauthorizedTTL time.Duration
	// Timeout bounds the join and the serving certificate.
	Timeout time.Duration
	// Kubelet holds the lab's own kubelet settings (periods, back-off,
	// static pods, shutdown grace, Log; a nil Log prints every step
	// stamped). Start fills in NodeName, Client, CRI, PodLogsDir and
	// HostIPs.
	Kubelet mykubelet.Options
	// Out is where the steps are printed.
	Out *labenv.Printer
}

// Node is a started node: registered, with its credentials, its kubelet
// and its server built. Run runs them; Close releases the rest.
type Node struct {
	Name string
	// IP is the node's InternalIP, URL its server's address.
	IP  net.IP
	URL string
	// Dir is the node's folder in the state folder (keys, certificates,
	// klog.log, the mock's socket); CAFile the cluster CA written there,
	// for curl.
	Dir, CAFile, KlogFile string
	// Host is the apiserver's URL.
	Host string
	// Admin is the admin client; CA the cluster CA (PEM).
	Admin kubernetes.Interface
	CA    []byte

	Runtime     *labruntime.Runtime
	Joined      *node.Joined
	ServingCert *server.ServingCert
	Kubelet     *mykubelet.Kubelet
	Server      *server.Server

	closers []func()
}

// Start brings the node up to the point where Run can start the sync loop
// and the server. On error, what was opened is closed again; a Node that
// registered before the error stays in the cluster (NotReady once its
// Lease expires), as a kubelet that failed at start-up leaves it.
func Start(ctx context.Context, o Options) (_ *Node, err error) {
	out := o.Out
	if out == nil {
		return nil, errors.New("labnode: no printer")
	}
	if o.Timeout <= 0 {
		return nil, errors.New("--timeout must be positive")
	}
	ip, err := nodeIP(o.Address, o.NodeIP)
	if err != nil {
		return nil, err
	}
	dir, err := labenv.NodeDir(o.Name)
	if err != nil {
		return nil, err
	}
	n := &Node{Name: o.Name, IP: ip, Dir: dir}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()

	// 1. On this machine first. The cluster, and its CA: it signed the
	// apiserver's kubelet-client certificate, which our server checks, and
	// it signs our serving certificate.
	cfg, err := labenv.RESTConfig(ctx, o.Kubeconfig)
	if err != nil {
		return nil, err
	}
	n.Host = cfg.Host
	if n.Admin, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if n.CA, _, err = bootstrap.ClusterCA(ctx, cfg, n.Admin); err != nil {
		return nil, err
	}
	// The port before the join: the Node publishes it, and a port in use
	// should stop us before anything is registered.
	ln, err := server.Listen(o.Address, o.Port)
	if err != nil {
		return nil, err
	}
	n.closers = append(n.closers, func() { ln.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	n.URL = "https://" + net.JoinHostPort(ip.String(), fmt.Sprint(port))
	// The runtime: without it the node would join and then run nothing.
	// The mock runs no processes, so nothing listens in its pods: MockHTTP
	// answers on their forwarded ports, as a web server in the pod would.
	n.Runtime, err = labruntime.Open(ctx, labruntime.Options{Flags: o.Runtime, Dir: dir,
		Mock: []fakecri.Option{fakecri.WithPortForwardHook(MockHTTP)}})
	if err != nil {
		return nil, err
	}
	n.closers = append(n.closers, n.Runtime.Close)
	if n.Runtime.Mock != nil {
		out.Printf("runtime   %s; its streaming server on %s", n.Runtime.Describe, streamingAddr(n.Runtime.Mock))
	} else {
		out.Printf("runtime   %s", n.Runtime.Describe)
	}
	// Upstream's pieces (the PLEG, the stream proxies, client-go) log
	// through klog: into a file, not between our lines.
	n.KlogFile = filepath.Join(dir, "klog.log")
	restore, err := labenv.KlogToFile(n.KlogFile)
	if err != nil {
		return nil, err
	}
	n.closers = append(n.closers, restore)

	// 2. The join, with the server's address in the Node's status: the
	// apiserver will dial InternalIP:port.
	var features []string
	if o.WebSockets {
		features = []string{server.WebSocketsFeature}
	}
	out.Printf("joining   %s as node %s (InternalIP %s, kubelet port %d, declared features: %s)", cfg.Host, o.Name, ip, port, orNone(features))
	n.Joined, err = node.Join(ctx, node.JoinOptions{Admin: cfg, Dir: dir, Token: o.Token, Name: o.Name, Lab: o.Lab, Timeout: o.Timeout,
		InternalIP: ip.String(), DaemonPort: int32(port), DeclaredFeatures: features, Log: out.Indented()})
	if err != nil {
		return nil, err
	}
	n.closers = append(n.closers, n.Joined.Stop)

	// 3. A serving certificate the apiserver can verify. After the join:
	// the approver checks the CSR's IP against the Node's addresses.
	n.ServingCert, err = server.ServingCertificate(ctx, server.ServingCertOptions{
		NodeName: o.Name, Client: n.Joined.Client, IPs: []net.IP{ip}, Dir: dir, CA: n.CA,
		Approve: server.AdminApprover(n.Admin), Timeout: o.Timeout, Log: out.Indented(),
	})
	if err != nil {
		return nil, err
	}
	n.CAFile = filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(n.CAFile, n.CA, 0o644); err != nil {
		return nil, err
	}

	// 4. The kubelet, acting as the node.
	ko := o.Kubelet
	ko.NodeName, ko.Client, ko.CRI, ko.PodLogsDir, ko.HostIPs = o.Name, n.Joined.Client, n.Runtime.CRI, n.Runtime.PodLogsDir, []string{ip.String()}
	if ko.Log == nil {
		ko.Log = out.Stamped
	}
	if n.Kubelet, err = mykubelet.New(ko); err != nil {
		return nil, err
	}

	// 5. The server: the pod manager says which pods are ours, the runtime
	// finds their containers and streams; /healthz includes the PLEG's.
	k := n.Kubelet
	n.Server, err = server.New(server.Config{
		NodeName: o.Name, Listener: ln, Certificate: n.ServingCert.Certificate, ClientCA: n.CA, Client: n.Joined.Client,
		Pods: k.Pods(), Runtime: n.Runtime.CRI.Runtime, WebSockets: o.WebSockets, UnauthorizedTTL: o.UnauthorizedTTL,
		HealthChecks: []healthz.HealthChecker{healthz.NamedCheck("pleg", func(*http.Request) error { return k.Healthy() })},
		Log:          func(f string, a ...any) { out.Stamped("server  "+f, a...) },
	})
	if err != nil {
		return nil, err
	}
	out.Printf("serving   %s: TLS with %s; clients need a certificate from the cluster CA, and every request is a SubjectAccessReview; upstream's own log lines go to %s",
		n.URL, n.ServingCert.Path, n.KlogFile)
	return n, nil
}

// Run runs the kubelet's sync loop and the node server until ctx ends and
// the kubelet has stopped (with a shutdown grace period: every pod
// stopped). The server outlives ctx until then, so kubectl logs and exec
// still reach pods while they stop.
func (n *Node) Run(ctx context.Context) error {
	sctx, stopServer := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServer()
	served := make(chan error, 1)
	go func() { served <- n.Server.Serve(sctx) }()
	runErr := n.Kubelet.Run(ctx)
	stopServer()
	return errors.Join(runErr, <-served)
}

// Close stops the heartbeats and releases the runtime, klog's file and the
// port, in the reverse order of Start. The Node stays in the cluster.
func (n *Node) Close() {
	for i := len(n.closers) - 1; i >= 0; i-- {
		n.closers[i]()
	}
	n.closers = nil
}

// nodeIP is the InternalIP to publish: the apiserver dials it, so the
// server must listen there.
func nodeIP(address, flagIP string) (net.IP, error) {
	addr := net.ParseIP(address)
	if addr == nil {
		return nil, fmt.Errorf("--address %q is not an IP address", address)
	}
	if flagIP != "" {
		ip := net.ParseIP(flagIP)
		if ip == nil {
			return nil, fmt.Errorf("--node-ip %q is not an IP address", flagIP)
		}
		if !addr.IsUnspecified() && !addr.Equal(ip) {
			return nil, fmt.Errorf("--node-ip %s but --address %s: the apiserver dials the node IP, so the server must listen there (--address %s or 0.0.0.0)", ip, addr, ip)
		}
		return ip, nil
	}
	if !addr.IsUnspecified() {
		return addr, nil
	}
	// All addresses: publish the one the default route leaves from, as
	// the kubelet picks its node IP.
	ip, err := utilnet.ResolveBindAddress(addr)
	if err != nil {
		return nil, fmt.Errorf("--address %s: cannot tell this machine's address (%v); give --node-ip", address, err)
	}
	return ip, nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
