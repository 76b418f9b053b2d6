// Package kubeletnode starts the node of labs 12 and 17 — our kubelet
// (mycore/mykubelet) acting as a node of the lab 00 cluster, without a node
// server — in the order a kubelet starts:
//
//  1. the runtime (internal/labruntime): without it the node would join and
//     then run nothing, so it fails first, with the command that fixes it;
//  2. the join (labs 03-05, mycore/node): bootstrap token → CSR → a client
//     certificate for system:node:NAME → the Node → the Lease; from here on
//     every call is the node's, checked by the Node authorizer;
//  3. the kubelet (mycore/mykubelet): pod source, pod manager, pod workers,
//     PLEG and pod cache, runtime manager, probes, status manager.
//
// The lab then runs the kubelet's sync loop (Node.Kubelet.Run). Labs 14 and
// 18 put a node server in front of the same kubelet: internal/labnode.
package kubeletnode

import (
	"context"
	"errors"
	"flag"
	"time"

	v1 "k8s.io/api/core/v1"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/mycore/mykubelet"
	"kubelet-labs/mycore/node"
	"kubelet-labs/mylib/fakecri"
)

// Options describe the node; they are the labs' flags.
type Options struct {
	// Lab is the lab's folder name, e.g. "12-pleg-containerd": the Node's
	// kubelet-labs.dev/lab-node label.
	Lab string
	// Kubeconfig is the admin kubeconfig ("" = labenv's default): the
	// server, its CA, and who makes the bootstrap token.
	Kubeconfig string
	// NodeName is the node to join; pods bound to it (spec.nodeName) run
	// here. Its folder in the state folder is nodes/NodeName.
	NodeName string
	// Runtime says which runtime to open.
	Runtime labruntime.Flags
	// Timeout bounds the join (certificate issued, node Ready).
	Timeout time.Duration
	// The kubelet's periods and crash-loop back-off.
	RelistPeriod, BackOffInitial, BackOffMax, GCPeriod time.Duration
	// Mock options, when the runtime is the mock in this process.
	Mock []fakecri.Option
}

// Register adds the node's flags to fs, with o's values as their defaults
// (a lab sets its node name and back-off first).
func (o *Options) Register(fs *flag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "admin kubeconfig: the server, its CA, and who makes the bootstrap token (default: $KUBECONFIG, else the state folder's admin.kubeconfig)")
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "name of the node to join; pods bound to it (spec.nodeName) run here")
	o.Runtime.Register(fs, labruntime.Containerd)
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "how long the join may take (certificate issued, node Ready)")
	fs.DurationVar(&o.RelistPeriod, "relist-period", o.RelistPeriod, "PLEG relist period (kubelet: 1s)")
	fs.DurationVar(&o.BackOffInitial, "backoff-initial", o.BackOffInitial, "crash-loop back-off of the first restart that waits (kubelet: 10s)")
	fs.DurationVar(&o.BackOffMax, "backoff-max", o.BackOffMax, "longest crash-loop back-off (kubelet: 5m)")
	fs.DurationVar(&o.GCPeriod, "gc-period", o.GCPeriod, "how often dead containers and sandboxes of pods that are over are removed (kubelet: 1m)")
}

// Defaults are the kubelet's own periods, for a lab to start from.
func Defaults(lab, nodeName string) Options {
	return Options{Lab: lab, NodeName: nodeName, Timeout: 2 * time.Minute,
		RelistPeriod: mykubelet.DefaultRelistPeriod, BackOffInitial: mykubelet.DefaultBackOffInitial,
		BackOffMax: mykubelet.DefaultBackOffMax, GCPeriod: mykubelet.DefaultGCPeriod}
}

// Check refuses what the node could not run with, before anything starts.
func (o *Options) Check() error {
	if o.Timeout <= 0 || o.RelistPeriod <= 0 || o.BackOffInitial <= 0 || o.GCPeriod <= 0 || o.BackOffMax < o.BackOffInitial {
		return errors.New("--timeout, --relist-period, --backoff-initial and --gc-period must be positive, --backoff-max at least --backoff-initial")
	}
	return labenv.CheckNodeName(o.NodeName)
}

// Node is a started node. Close it when the sync loop has returned.
type Node struct {
	Runtime *labruntime.Runtime
	Joined  *node.Joined
	Kubelet *mykubelet.Kubelet
}

// Start opens the runtime, joins the node and builds the kubelet, printing
// each step to out. On error, what was opened is closed again; a Node that
// registered before the error stays in the cluster (NotReady once its
// Lease expires), as a kubelet that failed at start-up leaves it.
func Start(ctx context.Context, o Options, out *labenv.Printer) (_ *Node, err error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	dir, err := labenv.NodeDir(o.NodeName)
	if err != nil {
		return nil, err
	}
	n := &Node{}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()

	// 1. The runtime first: without it the node would join and then run nothing.
	n.Runtime, err = labruntime.Open(ctx, labruntime.Options{Flags: o.Runtime, Dir: dir, Mock: o.Mock})
	if err != nil {
		return nil, err
	}
	out.Printf("runtime: %s", n.Runtime.Describe)

	// 2. The node, as lab 05 makes it; from here on we are system:node:NAME.
	cfg, err := labenv.RESTConfig(ctx, o.Kubeconfig)
	if err != nil {
		return nil, err
	}
	out.Printf("joining %s as node %s", cfg.Host, o.NodeName)
	n.Joined, err = node.Join(ctx, node.JoinOptions{Admin: cfg, Dir: dir, Name: o.NodeName, Lab: o.Lab, Timeout: o.Timeout,
		Log: out.Indented()})
	if err != nil {
		return nil, err
	}

	// 3. The kubelet, acting as the node: chapter 3's pieces in one.
	n.Kubelet, err = mykubelet.New(mykubelet.Options{
		NodeName: o.NodeName, Client: n.Joined.Client, CRI: n.Runtime.CRI, PodLogsDir: n.Runtime.PodLogsDir,
		HostIPs: InternalIPs(n.Joined.Node), RelistPeriod: o.RelistPeriod,
		BackOffInitial: o.BackOffInitial, BackOffMax: o.BackOffMax, GCPeriod: o.GCPeriod, Log: out.Stamped,
	})
	if err != nil {
		return nil, err
	}
	return n, nil
}

// Close stops the heartbeats and closes the runtime. The Node stays in the
// cluster; the pods keep running in the runtime, as when a kubelet stops.
func (n *Node) Close() {
	if n.Joined != nil {
		n.Joined.Stop()
	}
	if n.Runtime != nil {
		n.Runtime.Close()
	}
}

// InternalIPs are the node's InternalIP addresses: its pods' hostIP.
func InternalIPs(n *v1.Node) []string {
	var ips []string
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			ips = append(ips, a.Address)
		}
	}
	return ips
}
