// Package labnode starts a whole node of our own for a lab — the course's
// plumbing around mycore/node (the join and the Node object) and
// mycore/mykubelet (our kubelet), where lab 01's node is the real kubelet
// (mylib/fakenode): the kubelet of labs 07-17 and, if asked, the node
// server of lab 14 in front of it, in the order a kubelet starts:
//
//  1. what can fail before anything is registered: the flags and the
//     runtime; then the cluster answers, and says where the
//     apiserver is: with a server, the node's address is the one on this
//     machine's route to it (mycore/node ChooseNodeIP), unless the flags
//     give one, and the server's port there is free (the Node publishes
//     it);
//  2. the join (labs 03-05, mycore/node): bootstrap token → CSR → a client
//     certificate for system:node:NAME → the Node with our address (and
//     the server's port and declared features) → the Lease;
//  3. with a server, the serving certificate (lab 14): a
//     kubernetes.io/kubelet-serving CSR as the node, with the node's IP in
//     it, checked and approved as admin (nothing in a cluster approves
//     those on its own);
//  4. the kubelet (mycore/mykubelet): pod sources, pod manager, pod workers,
//     PLEG, probes, status manager;
//  5. with a server, the node server (mycore/server): exec, attach, logs,
//     port-forward, authenticated by client certificate and authorized by
//     SubjectAccessReview.
//
// Run then runs the kubelet's sync loop and the server side by side, as the
// real kubelet does (v1.36.3, cmd/kubelet/app/server.go): run gets the
// client certificate first (buildKubeletClientConfig :712, :963-1060), then
// RunKubelet :1234 → startKubelet :1290-1303 starts Run (the sync loop) and
// ListenAndServe (the server) in goroutines of their own.
//
// Labs 12 and 17 start a node without a server (their flags are the node's:
// Defaults, Register, Check); labs 14 (kubectl exec into our node) and 18
// (our whole kubelet) with one. It is named labnode so it is not taken for
// upstream's pkg/kubelet or our own mycore/node, which is only step 2.
package labnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/liveview"
	"kubelet-labs/mycore/bootstrap"
	"kubelet-labs/mycore/journal"
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
	// Name of the node; pods bound to it (spec.nodeName) run here. Its
	// folder in the state folder is nodes/Name.
	Name string
	// Kubeconfig is the admin kubeconfig ("" = labenv's default): the
	// server, its CA, and who makes the bootstrap token (and approves the
	// serving CSR).
	Kubeconfig string
	// Token "ID.SECRET" to join with (e.g. lab 03's); "": a new one.
	Token string
	// Runtime says which runtime to open (labruntime's flags).
	Runtime labruntime.Flags
	// Mock options added to the mock's, when the runtime is the mock in
	// this process (lab 17: the exec probes' /tmp).
	Mock []fakecri.Option
	// Timeout bounds the join and the serving certificate.
	Timeout time.Duration
	// Schedulable registers the node without node.NoRuntimeTaint, so a
	// scheduler may place pods on it. Only lab 18 runs a whole kubelet that
	// can take any pod bound to it; the other labs' nodes run part of one
	// for the pods the lab makes, and keep the taint.
	Schedulable bool
	// PodFiles gives the kubelet the node's pods folder (mykubelet's
	// PodsDir): the pods' volumes, termination-message files and managed
	// /etc/hosts. Only lab 18 runs that whole kubelet; the other labs'
	// nodes stop without a graceful shutdown (their pods keep running on
	// containerd), so the tmpfs of a pod's token volume would outlive the
	// lab in the learner's state folder — and they do not teach volumes.
	PodFiles bool
	// Kubelet holds the lab's own kubelet settings (periods, back-off,
	// static pods, shutdown grace, Log; a nil Log prints every step
	// stamped). Start fills in NodeName, Client, CRI, PodLogsDir, HostIPs
	// and, with PodFiles, PodsDir.
	Kubelet mykubelet.Options
	// View, if set, is the address of the live view (internal/liveview):
	// the kubelet's journal drawn in a browser, from a URL printed at
	// start. "" serves none.
	View string
	// Server, if set, puts the node server in front of the kubelet (labs
	// 14, 18). Without one (labs 12, 17) the Node publishes no port, so
	// kubectl logs, exec and port-forward cannot reach it.
	Server *ServerOptions
}

// Node is a started node: registered, with its credentials, its kubelet
// and (with a server) its server built. Run runs them; Close releases the
// rest.
type Node struct {
	Name string
	// IP is the node's InternalIP; URL its server's address ("" without
	// a server).
	IP  net.IP
	URL string
	// Dir is the node's folder in the state folder (keys, certificates,
	// klog.log, the mock's socket); CAFile the cluster CA written there,
	// for curl (with a server).
	Dir, CAFile, KlogFile string
	// Host is the apiserver's URL.
	Host string
	// Admin is the admin client; CA the cluster CA (PEM, with a server).
	Admin kubernetes.Interface
	CA    []byte

	Runtime *labruntime.Runtime
	Joined  *node.Joined
	Kubelet *mykubelet.Kubelet
	// ServingCert and Server are nil without a server.
	ServingCert *server.ServingCert
	Server      *server.Server
	// View is the live view (nil without Options.View).
	View *liveview.Server

	closers []func()
}

// Start brings the node up to the point where Run can start the sync loop
// (and the server), printing each step to out. On error, what was opened
// is closed again; a Node that registered before the error stays in the
// cluster (NotReady once its Lease expires), as a kubelet that failed at
// start-up leaves it.
func Start(ctx context.Context, o Options, out *labenv.Printer) (_ *Node, err error) {
	if o.Timeout <= 0 {
		return nil, errors.New("--timeout must be positive")
	}
	// Zero periods are the kubelet's (mykubelet.New); a maximum below the
	// first back-off is no back-off at all.
	if k := o.Kubelet; k.BackOffMax > 0 && k.BackOffMax < k.BackOffInitial {
		return nil, fmt.Errorf("--backoff-max %s is below --backoff-initial %s", k.BackOffMax, k.BackOffInitial)
	}
	dir, err := labenv.NodeDir(o.Name)
	if err != nil {
		return nil, err
	}
	// Nobody dials a node without a server: it publishes the loopback,
	// as node.Join does by default, and its pods' hostIP is that.
	n := &Node{Name: o.Name, Dir: dir, IP: net.IPv4(127, 0, 0, 1)}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()

	// 1. What can fail before anything is registered. The server's
	// addresses are checked here, but it listens only once the cluster
	// has said where the apiserver is (below).
	if o.Server != nil {
		if _, _, err := serverAddresses(o.Server.Address, o.Server.NodeIP); err != nil {
			return nil, err
		}
	}
	// The live view's port: its journal exists before the kubelet
	// (which publishes into it), and the page shows the node from its
	// first step.
	if o.Kubelet.Journal == nil {
		o.Kubelet.Journal = journal.New(journal.Options{Node: o.Name})
	}
	if o.View = ViewAddress(o.View); o.View != "" {
		if err := n.view(o, o.Kubelet.Journal, out); err != nil {
			return nil, err
		}
	}
	// The runtime: without it the node would join and then run nothing,
	// so it fails here, with the command that fixes it. The mock runs no
	// processes, so nothing listens in its pods: MockHTTP answers on their
	// forwarded ports, as a web server in the pod would.
	n.Runtime, err = labruntime.Open(ctx, labruntime.Options{Flags: o.Runtime, Dir: dir,
		Mock: append([]fakecri.Option{fakecri.WithPortForwardHook(MockHTTP)}, o.Mock...)})
	if err != nil {
		return nil, err
	}
	n.closers = append(n.closers, n.Runtime.Close)
	// What the Node will say its runtime is (containerRuntimeVersion): the
	// answer to the CRI Version call, which the kubelet gets before it
	// registers (kuberuntime_manager.go:292-307, v1.36.3).
	runtimeVersion, err := node.ContainerRuntimeVersion(n.Runtime.CRI.Context(ctx), n.Runtime.CRI.Runtime)
	if err != nil {
		return nil, err
	}
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
	// The cluster; with a server, its CA too: it signed the apiserver's
	// kubelet-client certificate, which our server checks, and it signs
	// our serving certificate.
	cfg, err := labenv.RESTConfig(ctx, o.Kubeconfig)
	if err != nil {
		return nil, err
	}
	n.Host = cfg.Host
	if n.Admin, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	// The port before the join: the Node publishes it, and a port in use
	// should stop us before anything is registered.
	var ln net.Listener
	if o.Server != nil {
		if n.CA, _, err = bootstrap.ClusterCA(ctx, cfg, n.Admin); err != nil {
			return nil, err
		}
		if ln, err = n.listen(ctx, *o.Server, out); err != nil {
			return nil, err
		}
	}

	// 2. The join, as lab 05 makes it, with the server's address in the
	// Node's status: the apiserver will dial InternalIP:port. From here on
	// every call is the node's, checked by the Node authorizer.
	jo := node.JoinOptions{Admin: cfg, Dir: dir, Token: o.Token, Name: o.Name, Lab: o.Lab, Timeout: o.Timeout,
		InternalIP: n.IP.String(), Log: out.Indented(), NoTaint: o.Schedulable, ContainerRuntimeVersion: runtimeVersion}
	if o.Server != nil {
		jo.DaemonPort, jo.DeclaredFeatures = int32(ln.Addr().(*net.TCPAddr).Port), o.Server.features()
		out.Printf("joining   %s as node %s (InternalIP %s, kubelet port %d, declared features: %s)", cfg.Host, o.Name, n.IP, jo.DaemonPort, orNone(jo.DeclaredFeatures))
	} else {
		out.Printf("joining   %s as node %s (InternalIP %s, no node server)", cfg.Host, o.Name, n.IP)
	}
	if n.Joined, err = node.Join(ctx, jo); err != nil {
		return nil, err
	}
	n.closers = append(n.closers, n.Joined.Stop)

	// 3. A serving certificate the apiserver can verify. After the join:
	// the approver checks the CSR's IP against the Node's addresses.
	if o.Server != nil {
		if err := n.servingCertificate(ctx, o.Timeout, out); err != nil {
			return nil, err
		}
	}

	// 4. The kubelet, acting as the node.
	ko := o.Kubelet
	ko.NodeName, ko.Client, ko.CRI, ko.PodLogsDir, ko.HostIPs = o.Name, n.Joined.Client, n.Runtime.CRI, n.Runtime.PodLogsDir, []string{n.IP.String()}
	// the kubelet's ROOT/pods: each pod's volumes, in the node's folder
	if o.PodFiles {
		ko.PodsDir = filepath.Join(dir, "pods")
	}
	if ko.Log == nil {
		ko.Log = out.Stamped
	}
	// ko.Journal: the one made in step 1, which the terminal and the live
	// view read.
	if n.Kubelet, err = mykubelet.New(ko); err != nil {
		return nil, err
	}

	// 5. The server, in front of it.
	if o.Server == nil {
		out.Printf("kubelet   built; upstream's own log lines go to %s", n.KlogFile)
		return n, nil
	}
	if err := n.serve(ln, *o.Server, out); err != nil {
		return nil, err
	}
	return n, nil
}

// Run runs the kubelet's sync loop, and the node server if there is one,
// until ctx ends and the kubelet has stopped (with a shutdown grace
// period: every pod stopped). The server outlives ctx until then, so
// kubectl logs and exec still reach pods while they stop.
func (n *Node) Run(ctx context.Context) error {
	if n.Server == nil {
		return n.Kubelet.Run(ctx)
	}
	sctx, stopServer := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServer()
	served := make(chan error, 1)
	go func() { served <- n.Server.Serve(sctx) }()
	runErr := n.Kubelet.Run(ctx)
	stopServer()
	return errors.Join(runErr, <-served)
}

// Close stops the heartbeats and releases klog's file, the runtime and the
// port, in the reverse order of Start. The Node stays in the cluster; on
// containerd the pods keep running, as when a kubelet stops.
func (n *Node) Close() {
	for i := len(n.closers) - 1; i >= 0; i-- {
		n.closers[i]()
	}
	n.closers = nil
}
