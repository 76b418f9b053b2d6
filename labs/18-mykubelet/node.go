package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/kubernetes"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/state"
	"kubelet-labs/mycore/bootstrap"
	"kubelet-labs/mycore/kubelet"
	"kubelet-labs/mycore/node"
	"kubelet-labs/mycore/server"
)

// DefaultNodeName is the single node's name.
const DefaultNodeName = "mykubelet"

// nodeOptions are the flags of the single node (no --nodes).
type nodeOptions struct {
	kubeconfig    string
	token         string
	nodeName      string
	runtime       string
	endpoint      string
	podLogsDir    string
	address       string
	port          int
	staticPodPath string
	relist        time.Duration
	backOffInit   time.Duration
	backOffMax    time.Duration
	shutdownGrace time.Duration
	keepPods      bool
	timeout       time.Duration
}

func (o *nodeOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.token, "token", "", "bootstrap token ID.SECRET to join with, e.g. the one lab 03 printed (default: make one with the admin kubeconfig)")
	fs.StringVar(&o.nodeName, "node-name", DefaultNodeName, "name of the node; pods with spec.nodeName=NAME run here")
	fs.StringVar(&o.runtime, "runtime", labruntime.Containerd, "container runtime: "+strings.Join(labruntime.Kinds(), ", ")+" (containerd: the instance scripts/containerd-up.sh named first; needs root. mock: in this process, no real containers)")
	fs.StringVar(&o.endpoint, "cri-endpoint", "", "with a containerd runtime: its endpoint (default: the state folder's containerd env file)")
	fs.StringVar(&o.podLogsDir, "pod-logs-dir", "", "where container logs go, in a folder named after the node (the kubelet's /var/log/pods) (default: containerd's POD_LOG_DIR; with the mock, the node's state folder)")
	fs.StringVar(&o.address, "address", "127.0.0.1", "address the node server listens on and the node's InternalIP (the kubelet's --address / --node-ip); the embedded control plane is on this machine, so loopback is enough")
	fs.IntVar(&o.port, "port", server.DefaultPort, "node server port (the kubelet's --port; 0 picks a free one)")
	fs.StringVar(&o.staticPodPath, "static-pod-path", "", "folder of static pod manifests (the kubelet's staticPodPath) (default: manifests/ in the node's state folder)")
	fs.DurationVar(&o.backOffInit, "backoff-initial", kubelet.DefaultBackOffInitial, "crash-loop back-off of the first restart that waits (kubelet: 10s)")
	fs.DurationVar(&o.backOffMax, "backoff-max", kubelet.DefaultBackOffMax, "longest crash-loop back-off (kubelet: 5m)")
	fs.DurationVar(&o.shutdownGrace, "shutdown-grace-period", 30*time.Second, "on Ctrl-C, every pod is stopped with grace min(its own, this), as the kubelet's graceful node shutdown (shutdownGracePeriod) does")
	fs.BoolVar(&o.keepPods, "keep-pods", false, "on Ctrl-C, leave the pods running, as a kubelet that restarts does (the next run finds them)")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long the join and the serving certificate may take")
}

// nodeLab is what a test gets once the node serves.
type nodeLab struct {
	node    *node.Joined
	kubelet *kubelet.Kubelet
	runtime *labruntime.Runtime
	static  string
}

// runNode is our kubelet as one program: every piece of labs 03-17 in the
// order a kubelet starts them.
func runNode(ctx context.Context, o nodeOptions, w io.Writer, onReady func(*nodeLab)) error {
	out := labenv.NewPrinter(w)
	if o.timeout <= 0 || o.relist <= 0 || o.backOffInit <= 0 || o.backOffMax < o.backOffInit || o.shutdownGrace < 0 {
		return errors.New("--timeout, --relist-period and --backoff-initial must be positive, --backoff-max at least --backoff-initial, --shutdown-grace-period not negative")
	}
	if err := labenv.CheckNodeName(o.nodeName); err != nil {
		return err
	}
	ip := net.ParseIP(o.address)
	if ip == nil || ip.IsUnspecified() {
		return fmt.Errorf("--address %q: give one IP address of this machine (the apiserver dials it)", o.address)
	}
	cfg, err := labenv.RESTConfig(ctx, o.kubeconfig)
	if err != nil {
		return err
	}
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// The cluster CA: it signed the apiserver's client certificate, which
	// the node server checks, and it signs our serving certificate.
	ca, _, err := bootstrap.ClusterCA(ctx, cfg, admin)
	if err != nil {
		return err
	}

	// 1. Everything that can fail locally, before the node registers: the
	// server's port (published in the Node), the runtime, the static pod
	// folder.
	ln, err := server.Listen(o.address, o.port)
	if err != nil {
		return err
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	dir, err := state.Ensure("nodes", o.nodeName)
	if err != nil {
		return err
	}
	rt, err := labruntime.Open(ctx, labruntime.Options{Flags: labruntime.Flags{Kind: o.runtime, Endpoint: o.endpoint, PodLogsDir: o.podLogsDir}, Dir: dir})
	if err != nil {
		return err
	}
	defer rt.Close()
	out.Printf("runtime   %s", rt.Describe)
	static := o.staticPodPath
	if static == "" {
		static = filepath.Join(dir, "manifests")
	}
	if static, err = filepath.Abs(static); err != nil {
		return err
	}
	if err := os.MkdirAll(static, 0o755); err != nil {
		return fmt.Errorf("--static-pod-path: %w", err)
	}
	klogFile := filepath.Join(dir, "klog.log")
	restore, err := labenv.KlogToFile(klogFile)
	if err != nil {
		return err
	}
	defer restore()

	// 2. Join (labs 03-06): bootstrap token → CSR → our client certificate
	// → the Node with this machine's capacity, our address and port → the
	// Lease, renewed in the background.
	out.Printf("joining   %s as node %s (InternalIP %s, kubelet port %d)", cfg.Host, o.nodeName, ip, port)
	j, err := node.Join(ctx, node.JoinOptions{Admin: cfg, Dir: dir, Token: o.token, Name: o.nodeName, Lab: "18-mykubelet", Timeout: o.timeout,
		InternalIP: ip.String(), DaemonPort: int32(port), DeclaredFeatures: []string{server.WebSocketsFeature},
		Log: out.Indented()})
	if err != nil {
		return err
	}
	defer j.Stop()

	// 3. A serving certificate for the node server (lab 14): a
	// kubelet-serving CSR as the node, checked and approved as admin.
	sc, err := server.ServingCertificate(ctx, server.ServingCertOptions{
		NodeName: o.nodeName, Client: j.Client, IPs: []net.IP{ip}, Dir: j.Dir, CA: ca,
		Approve: server.AdminApprover(admin), Timeout: o.timeout, Log: out.Indented(),
	})
	if err != nil {
		return err
	}

	// 4. The kubelet (labs 07-17): pod sources (the apiserver and the
	// static pod folder) → pod manager → pod workers → syncPod with probes
	// → CRI; PLEG; status manager; housekeeping and garbage collection.
	grace := o.shutdownGrace
	if o.keepPods {
		grace = 0
	}
	k, err := kubelet.New(kubelet.Options{
		NodeName: o.nodeName, Client: j.Client, CRI: rt.CRI, PodLogsDir: rt.PodLogsDir,
		HostIPs: []string{ip.String()}, RelistPeriod: o.relist,
		BackOffInitial: o.backOffInit, BackOffMax: o.backOffMax,
		StaticPodPath: static, ShutdownGracePeriod: grace,
		Log: out.Stamped,
	})
	if err != nil {
		return err
	}

	// 5. The node server (lab 14): exec, attach, logs, port-forward, /pods.
	srv, err := server.New(server.Config{
		NodeName: o.nodeName, Listener: ln, Certificate: sc.Certificate, ClientCA: ca, Client: j.Client,
		Pods: k.Pods(), Runtime: rt.CRI.Runtime, WebSockets: true, UnauthorizedTTL: server.DefaultUnauthorizedTTL,
		HealthChecks: []healthz.HealthChecker{healthz.NamedCheck("pleg", func(*http.Request) error { return k.Healthy() })},
		Log:          func(f string, a ...any) { out.Stamped("server  "+f, a...) },
	})
	if err != nil {
		return err
	}
	out.Printf("serving   https://%s (kubectl exec, logs, port-forward); static pods from %s; upstream's own log lines in %s",
		net.JoinHostPort(ip.String(), fmt.Sprint(port)), static, klogFile)
	hints(out, o, static)
	if onReady != nil {
		onReady(&nodeLab{node: j, kubelet: k, runtime: rt, static: static})
	}

	// 6. Until Ctrl-C: the sync loop and the server. Then the graceful
	// node shutdown (inside Run), and, unless --keep-pods, the runtime
	// cleared of everything this node made.
	sctx, stopServer := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServer()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx) }()
	runErr := k.Run(ctx)
	stopServer()
	if err := errors.Join(runErr, <-served); err != nil {
		return err
	}
	if o.keepPods {
		out.Printf("stopped   pods keep running in the runtime; the next run finds them. The Node stays (NotReady once its lease expires)")
		return nil
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	res, err := k.RemoveAll(cctx)
	out.Printf("stopped   removed %d container(s), %d sandbox(es) and %d log folder(s) of this node from the runtime", len(res.Containers), len(res.Sandboxes), len(res.LogDirs))
	out.Printf("          the Node and the pod objects stay (pods Failed, reason %s); remove the node with: kubectl delete node %s", kubelet.ShutdownReason, o.nodeName)
	return err
}

// hints prints what to try.
func hints(out *labenv.Printer, o nodeOptions, static string) {
	out.Printf("Pods with spec.nodeName=%s run here. Try, in another terminal:", o.nodeName)
	out.Printf("  kubectl apply -f labs/18-mykubelet/web.yaml && kubectl wait --for=condition=Ready pod/web && kubectl get pod web -o wide")
	out.Printf("  kubectl logs web;  kubectl exec web -- hostname;  kubectl port-forward pod/web 8080:8080   # curl -s localhost:8080")
	out.Printf("  kubectl apply -f labs/18-mykubelet/crash.yaml      # CrashLoopBackOff, restartCount growing")
	out.Printf("  kubectl apply -f labs/18-mykubelet/stubborn.yaml && kubectl delete pod stubborn   # ignores SIGTERM: killed at its 5 s grace")
	out.Printf("  %scp labs/18-mykubelet/static-clock.yaml %s/   # a static pod, and its mirror pod clock-%s", sudo(), static, o.nodeName)
}

// sudo is "sudo " when we were started with sudo: the static pod folder
// is root's then, and the learner's other terminal is not.
func sudo() string {
	if os.Geteuid() == 0 && os.Getenv("SUDO_USER") != "" {
		return "sudo "
	}
	return ""
}
