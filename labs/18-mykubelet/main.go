// Lab 18 is the capstone: our own kubelet, every piece built in labs 03-17,
// run as one program — one node on a real runtime, or many nodes in one
// process.
//
//	go run ./labs/18-mykubelet                   # node mykubelet on the course's containerd
//	go run ./labs/18-mykubelet --runtime mock    # the same on the mock CRI (no real containers)
//	go run ./labs/18-mykubelet --nodes 100       # fleet mode: 100 nodes on the mock runtime
//
// The single node starts in a kubelet's order (internal/labnode: port and
// runtime, join, serving certificate, kubelet, server), runs until Ctrl-C,
// then shuts down gracefully. Fleet mode is labs/18-mykubelet/fleetmode;
// the benchmark against KWOK is a tool of its own, hack/fleetbench.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
	netutils "k8s.io/utils/net"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labnames"
	"kubelet-labs/internal/labnode"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/labs/18-mykubelet/fleetmode"
	"kubelet-labs/mycore/logrotate"
	"kubelet-labs/mycore/mykubelet"
	"kubelet-labs/mycore/server"
)

// DefaultNodeName is the single node's name.
const DefaultNodeName = labnames.Node18

// options are the flags of the single node; fleet holds fleet mode's
// (--nodes N and the flags only it reads).
type options struct {
	kubeconfig    string
	relist        time.Duration
	token         string
	tokenFile     string
	nodeName      string
	runtime       labruntime.Flags
	address       string
	port          int
	staticPodPath string
	backOffInit   time.Duration
	backOffMax    time.Duration
	shutdownGrace time.Duration
	keepPods      bool
	timeout       time.Duration
	logMaxSize    string // "" (tests) is the default
	logMaxFiles   int    // 0 (tests) is the default
	view          string // "" (tests) is none
	clusterDNS    string // comma-separated IPs; "" is none, the kubelet's default
	clusterDomain string
	fleet         fleetmode.Options
	// clock is the node's (mykubelet.Options.Clock); no flag sets it: nil
	// is the real clock, and tests step a fake one instead of waiting.
	clock clock.WithTicker
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", labenv.KubeconfigUsage+"; one node gets its bootstrap token and serving certificate approved through it, in fleet mode every node shares its credential")
	fs.DurationVar(&o.relist, "relist-period", mykubelet.DefaultRelistPeriod, "each node's PLEG relists its runtime this often (kubelet: 1s)")
	labenv.RegisterTokenFlags(fs, &o.token, &o.tokenFile, "bootstrap token to join with, e.g. lab 03's (default: make one with the admin kubeconfig)")
	fs.StringVar(&o.nodeName, "node-name", DefaultNodeName, "name of the node; pods with spec.nodeName=NAME run here")
	o.runtime.Register(fs, labruntime.Containerd)
	fs.StringVar(&o.address, "address", "", "address the node server listens on and the node's InternalIP (the kubelet's --address / --node-ip) (default: this machine's address on its route to the apiserver, which dials the node back there: 127.0.0.1 on lab 00, the Docker bridge's address on kind); 0.0.0.0 listens on all and publishes the address on the route to the apiserver, or the default route's when that stays on loopback")
	fs.IntVar(&o.port, "port", server.DefaultPort, "node server port (the kubelet's --port; 0 picks a free one)")
	fs.StringVar(&o.staticPodPath, "static-pod-path", "", "folder of static pod manifests (the kubelet's staticPodPath) (default: manifests/ in the node's state folder)")
	fs.DurationVar(&o.backOffInit, "backoff-initial", mykubelet.DefaultBackOffInitial, "crash-loop back-off of the first restart that waits (kubelet: 10s)")
	fs.DurationVar(&o.backOffMax, "backoff-max", mykubelet.DefaultBackOffMax, "longest crash-loop back-off (kubelet: 5m)")
	fs.DurationVar(&o.shutdownGrace, "shutdown-grace-period", 30*time.Second, "on Ctrl-C, every pod is stopped with grace min(its own, this), as the kubelet's graceful node shutdown (shutdownGracePeriod) does")
	fs.BoolVar(&o.keepPods, "keep-pods", false, "on Ctrl-C, leave the pods running, as a kubelet that restarts does (the next run finds them)")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long the join and the serving certificate may take")
	fs.StringVar(&o.logMaxSize, "container-log-max-size", "10Mi", "a running container's log is rotated once it reaches this size, e.g. 64Ki (the kubelet's containerLogMaxSize: 10Mi); -1: never")
	fs.IntVar(&o.logMaxFiles, "container-log-max-files", logrotate.DefaultMaxFiles, "files of one container's log kept, the live one included (the kubelet's containerLogMaxFiles: 5)")
	fs.StringVar(&o.clusterDNS, "cluster-dns", "", "comma-separated IPs of the cluster's DNS servers, e.g. 10.0.0.10: the only nameservers of pods with dnsPolicy ClusterFirst (the kubelet's clusterDNS; default none, as the kubelet's: those pods then get this machine's /etc/resolv.conf and a Warning event MissingClusterDNS)")
	fs.StringVar(&o.clusterDomain, "cluster-domain", "", "the cluster's DNS domain, e.g. cluster.local: ClusterFirst pods search NS.svc.DOMAIN svc.DOMAIN DOMAIN before this machine's search domains, and a pod with spec.subdomain is named in it in /etc/hosts (the kubelet's clusterDomain; default \"\", as the kubelet's; kubeadm and kind set cluster.local)")
	o.view = DefaultView
	labnode.RegisterView(fs, &o.view)
	o.fleet.Register(fs)
}

// DefaultView is where the live view listens unless --view says: loopback,
// a free port; the URL is printed.
const DefaultView = "127.0.0.1:0"

func (o *options) check() error {
	if err := o.fleet.OnlyWithNodes(); err != nil {
		return err
	}
	if o.timeout <= 0 || o.relist <= 0 || o.backOffInit <= 0 || o.backOffMax < o.backOffInit || o.shutdownGrace < 0 {
		return errors.New("--timeout, --relist-period and --backoff-initial must be positive, --backoff-max at least --backoff-initial, --shutdown-grace-period not negative")
	}
	if _, err := o.containerLogMaxSize(); err != nil {
		return fmt.Errorf("--container-log-max-size: %w", err)
	}
	if o.logMaxFiles != 0 && o.logMaxFiles < 2 {
		return errors.New("--container-log-max-files must be at least 2: the live file and one rotated")
	}
	if _, err := labenv.ResolveToken(o.token, o.tokenFile); err != nil {
		return err
	}
	if err := labnode.CheckView(o.view); err != nil {
		return err
	}
	if _, err := o.clusterDNSIPs(); err != nil {
		return err
	}
	if d := o.clusterDomain; d != "" && len(validation.IsDNS1123Subdomain(d)) > 0 {
		return fmt.Errorf("--cluster-domain %q is not a DNS domain: lowercase letters, digits, '-' and '.', e.g. cluster.local", d)
	}
	return labenv.CheckNodeName(o.nodeName)
}

// clusterDNSIPs is --cluster-dns as IPs, parsed as the kubelet parses its
// clusterDNS (netutils.ParseIPSloppy, pkg/kubelet/kubelet.go:579-587) —
// but a bad one is an error here, where the kubelet logs it and goes on
// without it.
func (o *options) clusterDNSIPs() ([]net.IP, error) {
	if o.clusterDNS == "" {
		return nil, nil
	}
	var ips []net.IP
	for _, s := range strings.Split(o.clusterDNS, ",") {
		ip := netutils.ParseIPSloppy(strings.TrimSpace(s))
		if ip == nil {
			return nil, fmt.Errorf("--cluster-dns %q is not an IP address: want comma-separated IPs, e.g. 10.0.0.10", s)
		}
		ips = append(ips, ip)
	}
	return ips, nil
}

// containerLogMaxSize is --container-log-max-size in bytes (0: the default).
func (o *options) containerLogMaxSize() (int64, error) {
	if o.logMaxSize == "" {
		return 0, nil
	}
	return logrotate.ParseSize(o.logMaxSize)
}

func main() {
	var o options
	labenv.Main(labenv.Lab{
		Name:  "18-mykubelet",
		Flags: o.register,
		Check: o.check,
		Run: func(ctx context.Context, out *labenv.Printer) error {
			if o.fleet.Nodes > 0 {
				o.fleet.Kubeconfig, o.fleet.RelistPeriod, o.fleet.View = o.kubeconfig, o.relist, o.view
				o.fleet.ClusterDNS, _ = o.clusterDNSIPs() // Check read it
				o.fleet.ClusterDomain = o.clusterDomain
				return fleetmode.Run(ctx, o.fleet, out, nil)
			}
			return run(ctx, o, out, nil)
		},
	})
}

// nodeLab is what a test gets once the node serves.
type nodeLab struct {
	node   *labnode.Node
	static string
}

// run is our kubelet as one program: every piece of labs 03-17 in the
// order a kubelet starts them, until Ctrl-C.
func run(ctx context.Context, o options, out *labenv.Printer, onReady func(*nodeLab)) error {
	if err := o.check(); err != nil {
		return err
	}
	token, err := labenv.ResolveToken(o.token, o.tokenFile)
	if err != nil {
		return err
	}
	// The static pod folder is this machine's, so it is made before the
	// node registers, like the port and the runtime (in labnode.Start).
	dir, err := labenv.NodeDir(o.nodeName)
	if err != nil {
		return err
	}
	static, err := labenv.StaticPodFolder(dir, o.staticPodPath)
	if err != nil {
		return fmt.Errorf("--static-pod-path: %w", err)
	}

	// Port, runtime, join (labs 03-06), serving certificate (14), then the
	// kubelet (07-17): pod sources (the apiserver and the static pod
	// folder) → pod manager → pod workers → syncPod with probes → CRI;
	// PLEG; status manager; housekeeping and garbage collection. With
	// --keep-pods no shutdown grace: Run returns at once, pods stay.
	grace := o.shutdownGrace
	if o.keepPods {
		grace = 0
	}
	logMaxSize, _ := o.containerLogMaxSize() // check() read it
	clusterDNS, _ := o.clusterDNSIPs()
	n, err := labnode.Start(ctx, labnode.Options{
		Lab: "18-mykubelet", Name: o.nodeName, Kubeconfig: o.kubeconfig, Token: token, Runtime: o.runtime, Timeout: o.timeout,
		// our whole kubelet: a scheduler may place pods here (no NoSchedule taint)
		Schedulable: true,
		// and its pods' volumes, termination messages and /etc/hosts
		PodFiles: true,
		Kubelet: mykubelet.Options{
			RelistPeriod: o.relist, BackOffInitial: o.backOffInit, BackOffMax: o.backOffMax,
			StaticPodPath: static, ShutdownGracePeriod: grace,
			ContainerLogMaxSize: logMaxSize, ContainerLogMaxFiles: o.logMaxFiles,
			ClusterDNS: clusterDNS, ClusterDomain: o.clusterDomain,
			Clock: o.clock,
		},
		Server: &labnode.ServerOptions{Address: o.address, Port: o.port, WebSockets: true},
		View:   o.view,
	}, out)
	if err != nil {
		return err
	}
	defer n.Close()
	hints(out, o.nodeName, n.Runtime.Kind == labruntime.Mock, static)
	if onReady != nil {
		onReady(&nodeLab{node: n, static: static})
	}

	// Until Ctrl-C: the sync loop and the server. Then the graceful node
	// shutdown (inside Run), and, unless --keep-pods, the runtime cleared
	// of everything this node made.
	if err := n.Run(ctx); err != nil {
		return err
	}
	if o.keepPods {
		out.Printf("stopped   pods keep running in the runtime; the next run finds them. The Node stays (NotReady once its lease expires)")
		return nil
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	res, err := n.Kubelet.RemoveAll(cctx)
	out.Printf("stopped   removed %d container(s), %d sandbox(es) and %d log folder(s) of this node from the runtime", len(res.Containers), len(res.Sandboxes), len(res.LogDirs))
	out.Printf("          the Node and the pod objects stay (pods Failed, reason %s); remove the node with: kubectl delete node %s", mykubelet.ShutdownReason, o.nodeName)
	return err
}

// hints prints what to try. The mock runs no processes — its shell knows
// echo, sleep, trap, while and exit, no httpd and no $(...) — so web.yaml,
// a busybox httpd with HTTP probes, cannot run there: web-mock.yaml is the
// same pod made of what the mock runs, with exec probes. The others run on
// both.
func hints(out *labenv.Printer, nodeName string, mock bool, static string) {
	web, curl := "labs/18-mykubelet/web.yaml", "curl -s localhost:8080"
	if mock {
		web, curl = "labs/18-mykubelet/web-mock.yaml", "curl -s localhost:8080   (the mock answers for the pod)"
	}
	out.Printf("Pods with spec.nodeName=%s run here. Try, in another terminal:", nodeName)
	out.Printf("  kubectl apply -f %s && kubectl wait --for=condition=Ready pod/web && kubectl get pod web -o wide", web)
	out.Printf("  kubectl logs web;  kubectl exec web -- hostname;  kubectl port-forward pod/web 8080:8080   # %s", curl)
	out.Printf("  kubectl apply -f labs/18-mykubelet/crash.yaml      # CrashLoopBackOff, restartCount growing")
	out.Printf("  kubectl apply -f labs/18-mykubelet/stubborn.yaml && kubectl delete pod stubborn   # ignores SIGTERM: killed at its 5 s grace")
	out.Printf("  cp labs/18-mykubelet/static-clock.yaml %s/   # a static pod, and its mirror pod clock-%s", static, nodeName)
}
