// Lab 14 is `kubectl exec` into our own node. The node (lab-node-14) runs
// pods with the kubelet of chapter 3 (mycore/mykubelet), and in front of it
// is our HTTPS server — the kubelet API the apiserver calls for exec,
// attach, logs and port-forward (mycore/server):
//
//	kubectl ─▶ kube-apiserver ─▶ our node server ─CRI Exec─▶ runtime
//	                                   └─ upgrade-aware proxy ─▶ runtime's streaming server
//
// The node starts as a kubelet does (internal/labnode): the server's port
// first (the Node publishes it), the join as system:node:lab-node-14, a
// serving certificate through a kubernetes.io/kubelet-serving CSR, then
// the kubelet and the server side by side. This lab adds a visitor: a
// user with a certificate from the cluster CA and no RBAC rights, to knock
// on the server with curl.
//
//	go run ./labs/14-exec                         # the mock CRI, in this process
//	go run ./labs/14-exec --runtime containerd    # the course's containerd
//	kubectl apply -f labs/14-exec/shell.yaml      # in another terminal
//	kubectl exec shell -- echo hi
package main

import (
	"context"
	"errors"
	"flag"
	"time"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labnames"
	"kubelet-labs/internal/labnode"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/labs/14-exec/visitor"
	"kubelet-labs/mycore/mykubelet"
	"kubelet-labs/mycore/server"
)

// defaultNodeName is the node shell.yaml's pod is bound to.
const defaultNodeName = labnames.Node14

type options struct {
	kubeconfig   string
	nodeName     string
	runtime      labruntime.Flags
	address      string
	nodeIP       string
	port         int
	websockets   bool
	denyTTL      time.Duration
	timeout      time.Duration
	quietKubelet bool
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", labenv.KubeconfigUsage)
	fs.StringVar(&o.nodeName, "node-name", defaultNodeName, "name of the node to join; pods bound to it (spec.nodeName) run here")
	o.runtime.Register(fs, labruntime.Mock)
	fs.StringVar(&o.address, "address", "", "address the node server listens on (the kubelet's --address) (default: this machine's address on its route to the apiserver, which dials the node back there: 127.0.0.1 on lab 00, the Docker bridge's address on kind); 0.0.0.0 = all addresses")
	fs.StringVar(&o.nodeIP, "node-ip", "", "InternalIP the node publishes, which the apiserver dials (default: --address; with --address 0.0.0.0, the address on the route to the apiserver, or the default route's when that stays on loopback)")
	fs.IntVar(&o.port, "port", server.DefaultPort, "node server port (the kubelet's --port; 0 picks a free one)")
	fs.BoolVar(&o.websockets, "websockets", true, "declare ExtendWebSocketsToKubelet in the Node's status and serve WebSocket v5 here, as a 1.36 kubelet does; false: the apiserver translates kubectl's WebSocket to SPDY for us")
	fs.DurationVar(&o.denyTTL, "authorization-webhook-cache-unauthorized-ttl", server.DefaultUnauthorizedTTL, "how long a denied SubjectAccessReview is cached (the kubelet's flag of this name)")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long the join and the serving certificate may take")
	fs.BoolVar(&o.quietKubelet, "quiet-kubelet", false, "print only the node server's lines, not every step of the kubelet")
}

func (o *options) check() error {
	if o.timeout <= 0 || o.denyTTL <= 0 {
		return errors.New("--timeout and --authorization-webhook-cache-unauthorized-ttl must be positive")
	}
	return labenv.CheckNodeName(o.nodeName)
}

func main() {
	var o options
	labenv.Main(labenv.Lab{
		Name:  "14-exec",
		Flags: o.register,
		Check: o.check,
		Run:   func(ctx context.Context, out *labenv.Printer) error { return run(ctx, o, out, nil) },
	})
}

// lab is what a test gets once the node serves.
type lab struct {
	node    *labnode.Node
	visitor *visitor.Files
}

func run(ctx context.Context, o options, out *labenv.Printer, onReady func(*lab)) error {
	if err := o.check(); err != nil {
		return err
	}
	// The kubelet's own lines, marked as such: the server's lines are the
	// lesson here.
	logf := func(f string, a ...any) { out.Stamped("kubelet "+f, a...) }
	if o.quietKubelet {
		logf = func(string, ...any) {}
	}
	n, err := labnode.Start(ctx, labnode.Options{
		Lab: "14-exec", Name: o.nodeName, Kubeconfig: o.kubeconfig, Runtime: o.runtime, Timeout: o.timeout,
		Kubelet: mykubelet.Options{Log: logf},
		Server: &labnode.ServerOptions{Address: o.address, NodeIP: o.nodeIP, Port: o.port,
			WebSockets: o.websockets, UnauthorizedTTL: o.denyTTL},
	}, out)
	if err != nil {
		return err
	}
	defer n.Close()

	// The visitor: authenticated by the server's TLS (the cluster CA
	// signed its certificate), then refused by the SubjectAccessReview.
	vis, err := visitor.Credentials(ctx, n.Admin, n.CA, n.Dir)
	if err != nil {
		return err
	}

	out.Printf("Try, in another terminal:")
	if o.nodeName != defaultNodeName {
		// shell.yaml names its node: a pod for this one, with the same image.
		out.Printf("  (shell.yaml's pod is bound to %s; one for %s: kubectl run POD --image=%s --overrides='{\"spec\":{\"nodeName\":\"%s\"}}' -- sleep 3600)",
			defaultNodeName, o.nodeName, labruntime.BusyboxImage, o.nodeName)
	}
	out.Printf("  kubectl apply -f labs/14-exec/shell.yaml && kubectl wait --for=condition=Ready pod/shell")
	out.Printf("  kubectl exec shell -- echo hi")
	out.Printf("  kubectl exec shell -- sh -c 'exit 3'; echo \"exit code $?\"")
	out.Printf("  kubectl exec -it shell -- sh")
	out.Printf("  kubectl logs -f shell")
	out.Printf("  kubectl port-forward pod/shell 8080:8080   # then, in a third terminal: curl -s localhost:8080/hostname")
	out.Printf("and knock on the node server yourself, with curl:")
	out.Printf("  export D=%s N=%s", n.Dir, n.URL)
	out.Printf("  curl -sS --cacert $D/ca.crt $N/pods                                           # no client certificate")
	out.Printf("  curl -sS --cacert $D/ca.crt --cert $D/visitor.crt --key $D/visitor.key $N/pods   # %s: no RBAC rights", visitor.User)
	out.Printf("  kubectl create clusterrolebinding %s --clusterrole=system:kubelet-api-admin --user=%s", visitor.User, visitor.User)
	out.Printf("  curl -sS --cacert $D/ca.crt --cert $D/visitor.crt --key $D/visitor.key $N/containerLogs/default/shell/nosuch")
	if onReady != nil {
		onReady(&lab{node: n, visitor: vis})
	}

	// Until Ctrl-C: the kubelet's sync loop and the server.
	if err := n.Run(ctx); err != nil {
		return err
	}
	out.Printf("stopped   the Node stays (NotReady after its lease expires); pods keep running in the runtime when it is containerd")
	return nil
}
