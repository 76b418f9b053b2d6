// Lab 14 is `kubectl exec` into our own node. The node (lab-node-14) runs
// pods as chapter 3 built it, and in front of it our HTTPS server — the
// kubelet API the apiserver calls for exec, attach, logs and
// port-forward:
//
//	kubectl ─▶ kube-apiserver ─▶ our node server ─CRI Exec─▶ runtime
//	                                   └─ upgrade-aware proxy ─▶ runtime's streaming server
//
// In order: open the server's port (it must be known before the node
// registers, to be published in the Node's status), join the cluster as
// system:node:lab-node-14, get a serving certificate through a
// kubernetes.io/kubelet-serving CSR, start the kubelet (mycore/kubelet)
// and the server (mycore/server) side by side.
//
//	go run ./labs/14-exec                       # the mock CRI
//	sudo go run ./labs/14-exec --runtime containerd
//	kubectl apply -f labs/14-exec/shell.yaml    # in another terminal
//	kubectl exec shell -- echo hi
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
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/kubernetes"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/state"
	"kubelet-labs/mycore/bootstrap"
	"kubelet-labs/mycore/kubelet"
	"kubelet-labs/mycore/node"
	"kubelet-labs/mycore/server"
	"kubelet-labs/mylib/fakecri"
)

type options struct {
	kubeconfig   string
	nodeName     string
	runtime      string
	endpoint     string
	address      string
	nodeIP       string
	port         int
	websockets   bool
	denyTTL      time.Duration
	timeout      time.Duration
	quietKubelet bool
}

func main() {
	// Our own flag set: package kubelet (imported for its types) registers
	// cAdvisor's flags on flag.CommandLine; -h should list only ours.
	fs := flag.NewFlagSet("14-exec", flag.ExitOnError)
	var o options
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "admin kubeconfig: the server, its CA, who makes the bootstrap token and approves the serving CSR (default: $KUBECONFIG, else the state folder's admin.kubeconfig)")
	fs.StringVar(&o.nodeName, "node-name", "lab-node-14", "name of the node to join; pods bound to it (spec.nodeName) run here")
	fs.StringVar(&o.runtime, "runtime", labruntime.Mock, "container runtime: "+strings.Join(labruntime.Kinds(), ", ")+" (mock: the mock CRI, in this process. containerd: the course's, started by scripts/containerd-up.sh, the instance it named first; needs root)")
	fs.StringVar(&o.endpoint, "cri-endpoint", "", "with a containerd --runtime: its endpoint (default: the state folder's containerd/env)")
	fs.StringVar(&o.address, "address", "127.0.0.1", "address the node server listens on (the kubelet's --address); the embedded control plane is on this machine, so loopback is enough; 0.0.0.0 for a cluster elsewhere (kind in the VM)")
	fs.StringVar(&o.nodeIP, "node-ip", "", "InternalIP the node publishes, which the apiserver dials (default: --address, or this machine's address when --address is 0.0.0.0)")
	fs.IntVar(&o.port, "port", server.DefaultPort, "node server port (the kubelet's --port; 0 picks a free one)")
	fs.BoolVar(&o.websockets, "websockets", true, "declare ExtendWebSocketsToKubelet in the Node's status and serve WebSocket v5 here, as a 1.36 kubelet does; false: the apiserver translates kubectl's WebSocket to SPDY for us")
	fs.DurationVar(&o.denyTTL, "authorization-webhook-cache-unauthorized-ttl", server.DefaultUnauthorizedTTL, "how long a denied SubjectAccessReview is cached (the kubelet's flag of this name)")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long the join and the serving certificate may take")
	fs.BoolVar(&o.quietKubelet, "quiet-kubelet", false, "print only the node server's lines, not every step of the kubelet")
	_ = fs.Parse(os.Args[1:]) // ExitOnError: a bad flag exits 2 with the usage

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout, nil); err != nil {
		labenv.Fatal(err)
	}
}

// lab is what a test gets once the node serves.
type lab struct {
	node    *node.Joined
	kubelet *kubelet.Kubelet
	server  *server.Server
	visitor *visitor
	caFile  string
}

func run(ctx context.Context, o options, w io.Writer, onReady func(*lab)) error {
	out := labenv.NewPrinter(w)
	if o.timeout <= 0 || o.denyTTL <= 0 {
		return errors.New("--timeout and --authorization-webhook-cache-unauthorized-ttl must be positive")
	}
	if err := labenv.CheckNodeName(o.nodeName); err != nil {
		return err
	}
	ip, err := nodeIP(o.address, o.nodeIP)
	if err != nil {
		return err
	}
	cfg, err := labenv.RESTConfig(ctx, o.kubeconfig)
	if err != nil {
		return err
	}
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// The cluster CA, as the join reads it: it signed the apiserver's
	// kubelet-client certificate, and it signs our serving certificate.
	ca, _, err := bootstrap.ClusterCA(ctx, cfg, admin)
	if err != nil {
		return err
	}

	// 1. The port first: the Node publishes it, and a port in use should
	// stop us before anything is registered.
	ln, err := server.Listen(o.address, o.port)
	if err != nil {
		return err
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port

	// 2. The runtime: without it the node would join and then run nothing.
	dir, err := state.Ensure("nodes", o.nodeName)
	if err != nil {
		return err
	}
	// The mock runs no processes: mockHTTP (mockhttp.go) answers on its
	// forwarded ports, as the pod's busybox httpd does on containerd.
	rt, err := labruntime.Open(ctx, labruntime.Options{Flags: labruntime.Flags{Kind: o.runtime, Endpoint: o.endpoint}, Dir: dir,
		Mock: []fakecri.Option{fakecri.WithPortForwardHook(mockHTTP)}})
	if err != nil {
		return err
	}
	defer rt.Close()
	if rt.Mock != nil {
		out.Printf("runtime: %s; its streaming server on %s", rt.Describe, streamingAddr(rt.Mock))
	} else {
		out.Printf("runtime: %s", rt.Describe)
	}
	// Upstream's stream proxies and the PLEG log through klog: to a file,
	// not between our lines.
	restore, err := labenv.KlogToFile(filepath.Join(dir, "klog.log"))
	if err != nil {
		return err
	}
	defer restore()

	// 3. The node, as lab 05 makes it, with its server's address in its
	// status: the apiserver will dial InternalIP:port.
	var features []string
	if o.websockets {
		features = []string{server.WebSocketsFeature}
	}
	out.Printf("joining %s as node %s (InternalIP %s, kubelet port %d, declared features: %s)", cfg.Host, o.nodeName, ip, port, orNone(features))
	j, err := node.Join(ctx, node.JoinOptions{Admin: cfg, Dir: dir, Name: o.nodeName, Lab: "14-exec", Timeout: o.timeout,
		InternalIP: ip.String(), DaemonPort: int32(port), DeclaredFeatures: features,
		Log: out.Indented()})
	if err != nil {
		return err
	}
	defer j.Stop()

	// 4. A serving certificate the apiserver can verify: a CSR for the
	// kubelet-serving signer, as the node, with the node's IP in it. No
	// controller approves those; we check it and approve it as admin.
	sc, err := server.ServingCertificate(ctx, server.ServingCertOptions{
		NodeName: o.nodeName, Client: j.Client, IPs: []net.IP{ip}, Dir: j.Dir, CA: ca,
		Approve: server.AdminApprover(admin), Timeout: o.timeout,
		Log: out.Indented(),
	})
	if err != nil {
		return err
	}
	caFile := filepath.Join(j.Dir, "ca.crt")
	if err := os.WriteFile(caFile, ca, 0o644); err != nil {
		return err
	}
	vis, err := visitorCredentials(ctx, admin, ca, j.Dir)
	if err != nil {
		return err
	}

	// 5. The kubelet of chapter 3 on the runtime.
	logf := func(f string, a ...any) { out.Printf(time.Now().Format("15:04:05.000")+" kubelet  "+f, a...) }
	if o.quietKubelet {
		logf = func(string, ...any) {}
	}
	k, err := kubelet.New(kubelet.Options{NodeName: o.nodeName, Client: j.Client, CRI: rt.CRI, PodLogsDir: rt.PodLogsDir,
		HostIPs: []string{ip.String()}, Log: logf})
	if err != nil {
		return err
	}

	// 6. The server: the pod manager says which pods are ours, the
	// runtime finds their containers and streams.
	srv, err := server.New(server.Config{
		NodeName: o.nodeName, Listener: ln, Certificate: sc.Certificate, ClientCA: ca, Client: j.Client,
		Pods: k.Pods(), Runtime: rt.CRI.Runtime, WebSockets: o.websockets, UnauthorizedTTL: o.denyTTL,
		HealthChecks: []healthz.HealthChecker{healthz.NamedCheck("pleg", func(*http.Request) error { return k.Healthy() })},
		Log:          func(f string, a ...any) { out.Printf(time.Now().Format("15:04:05.000")+" server   "+f, a...) },
	})
	if err != nil {
		return err
	}
	url := fmt.Sprintf("https://%s", net.JoinHostPort(ip.String(), fmt.Sprint(port)))
	out.Printf("node server on %s: TLS with the certificate of %s; clients need a certificate from the cluster CA; every request is a SubjectAccessReview", url, sc.Path)
	out.Printf("Try, in another terminal:")
	out.Printf("  kubectl apply -f labs/14-exec/shell.yaml && kubectl wait --for=condition=Ready pod/shell")
	out.Printf("  kubectl exec shell -- echo hi")
	out.Printf("  kubectl exec shell -- sh -c 'exit 3'; echo \"exit code $?\"")
	out.Printf("  kubectl exec -it shell -- sh")
	out.Printf("  kubectl logs -f shell")
	out.Printf("  kubectl port-forward pod/shell 8080:8080   # then, in a third terminal: curl -s localhost:8080/hostname")
	out.Printf("and knock on the node server yourself, with curl:")
	out.Printf("  D=%s N=%s", j.Dir, url)
	out.Printf("  curl -sS --cacert $D/ca.crt $N/pods                                           # no client certificate")
	out.Printf("  curl -sS --cacert $D/ca.crt --cert $D/visitor.crt --key $D/visitor.key $N/pods   # %s: no RBAC rights", VisitorUser)
	out.Printf("  kubectl create clusterrolebinding %s --clusterrole=system:kubelet-api-admin --user=%s", VisitorUser, VisitorUser)
	out.Printf("  curl -sS --cacert $D/ca.crt --cert $D/visitor.crt --key $D/visitor.key $N/containerLogs/default/shell/nosuch")

	if onReady != nil {
		onReady(&lab{node: j, kubelet: k, server: srv, visitor: vis, caFile: caFile})
	}

	// 7. Both until Ctrl-C: the kubelet's sync loop, and the server.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	runErr := k.Run(ctx)
	cancel()
	if err := errors.Join(runErr, <-served); err != nil {
		return err
	}
	out.Printf("stopped: the Node stays (NotReady after its lease expires); pods keep running in the runtime when it is containerd")
	return nil
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
