// Lab 12 is chapter 3 on a real runtime: the pods bound to node
// lab-node-12 flow informer → pod manager → pod workers, the workers' syncer
// runs them on containerd (a sandbox with CNI networking, then the
// containers), the kubelet's own PLEG relists containerd every second into
// the pod cache that gates the workers, and the status manager posts what
// the runtime shows back to the apiserver.
//
// All of it is mycore/kubelet (the wiring) over mycore/kuberuntime (pods
// to CRI calls), mycore/runtime (CRI to the PLEG), mycore/podworkers and
// mycore/status; this file is the order in which a kubelet starts them.
//
//	sudo scripts/containerd-up.sh
//	sudo go run ./labs/12-pleg-containerd
//	kubectl apply -f labs/12-pleg-containerd/busybox.yaml   # in another terminal
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/kubelet"
	"kubelet-labs/mycore/node"
)

type options struct {
	kubeconfig  string
	nodeName    string
	endpoint    string
	podLogsDir  string
	timeout     time.Duration
	relist      time.Duration
	backOffInit time.Duration
	backOffMax  time.Duration
	gcPeriod    time.Duration
}

func main() {
	// Our own flag set: package kubelet (imported for its types) registers
	// cAdvisor's flags on flag.CommandLine; -h should list only ours.
	fs := flag.NewFlagSet("12-pleg-containerd", flag.ExitOnError)
	var o options
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "admin kubeconfig: the server, its CA, and who makes the bootstrap token (default: $KUBECONFIG, else the state folder's admin.kubeconfig)")
	fs.StringVar(&o.nodeName, "node-name", "lab-node-12", "name of the node to join; pods bound to it (spec.nodeName) run on containerd")
	fs.StringVar(&o.endpoint, "cri-endpoint", "", "CRI endpoint (default: the course's containerd from the state folder's containerd/env, or $CONTAINER_RUNTIME_ENDPOINT)")
	fs.StringVar(&o.podLogsDir, "pod-logs-dir", "", "where container logs go (default: POD_LOG_DIR of the containerd env file)")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long the join may take (certificate issued, node Ready)")
	fs.DurationVar(&o.relist, "relist-period", kubelet.DefaultRelistPeriod, "PLEG relist period (kubelet: 1s)")
	fs.DurationVar(&o.backOffInit, "backoff-initial", kubelet.DefaultBackOffInitial, "crash-loop back-off of the first restart after a failure (kubelet: 10s)")
	fs.DurationVar(&o.backOffMax, "backoff-max", kubelet.DefaultBackOffMax, "longest crash-loop back-off (kubelet: 5m)")
	fs.DurationVar(&o.gcPeriod, "gc-period", kubelet.DefaultGCPeriod, "how often dead containers and sandboxes of pods that are over are removed (kubelet: 1m)")
	_ = fs.Parse(os.Args[1:]) // ExitOnError: a bad flag exits 2 with the usage

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout, nil); err != nil {
		labenv.Fatal(err)
	}
}

// lab is what a test gets once the node runs.
type lab struct {
	node    *node.Joined
	kubelet *kubelet.Kubelet
	env     labruntime.Env
}

func run(ctx context.Context, o options, w io.Writer, onReady func(*lab)) error {
	out := labenv.NewPrinter(w)
	if o.timeout <= 0 || o.relist <= 0 || o.backOffInit <= 0 || o.backOffMax < o.backOffInit || o.gcPeriod <= 0 {
		return errors.New("--timeout, --relist-period, --backoff-initial and --gc-period must be positive, --backoff-max at least --backoff-initial")
	}
	if err := labenv.CheckNodeName(o.nodeName); err != nil {
		return err
	}

	// 1. The runtime first: without it the node would join and then run nothing.
	env, err := labruntime.Load()
	if err != nil {
		return err
	}
	if o.endpoint != "" {
		env.Endpoint = cri.NormalizeEndpoint(o.endpoint)
	}
	if o.podLogsDir != "" {
		env.PodLogDir = o.podLogsDir
	}
	crc, err := cri.Dial(ctx, env.Endpoint)
	if err != nil {
		return fmt.Errorf("%w\n(start it with: %s)", err, cri.UpHint)
	}
	defer crc.Close()
	info, err := crc.Info(ctx)
	if err != nil {
		return err
	}
	if !info.Ready("NetworkReady") {
		return fmt.Errorf("%s is up but its pod network is not ready (no CNI config?): restart it with %s", env.Endpoint, cri.UpHint)
	}
	out.Printf("runtime %s %s on %s", info.RuntimeName, info.RuntimeVersion, env.Endpoint)

	// 2. The node, as lab 05 makes it; from here on we are system:node:NAME.
	cfg, err := labenv.RESTConfig(ctx, o.kubeconfig)
	if err != nil {
		return err
	}
	out.Printf("joining %s as node %s", cfg.Host, o.nodeName)
	dir, err := labenv.NodeDir(o.nodeName)
	if err != nil {
		return err
	}
	j, err := node.Join(ctx, node.JoinOptions{Admin: cfg, Dir: dir, Name: o.nodeName, Lab: "12-pleg-containerd", Timeout: o.timeout,
		Log: out.Indented()})
	if err != nil {
		return err
	}
	defer j.Stop()

	// 3. The kubelet's chapter 3 in one piece: pod source, pod manager, pod
	// workers, PLEG + pod cache, runtime manager, status manager.
	k, err := kubelet.New(kubelet.Options{
		NodeName: o.nodeName, Client: j.Client, CRI: crc, PodLogsDir: env.PodLogDir,
		HostIPs: internalIPs(j.Node), RelistPeriod: o.relist,
		BackOffInitial: o.backOffInit, BackOffMax: o.backOffMax, GCPeriod: o.gcPeriod, Log: out.Stamped,
	})
	if err != nil {
		return err
	}
	out.Printf("PLEG relists %s every %s; pods with spec.nodeName=%s run there, their logs under %s. Try, in another terminal:", info.RuntimeName, o.relist, o.nodeName, k.PodLogsDir())
	out.Printf("  kubectl apply -f labs/12-pleg-containerd/busybox.yaml && kubectl get pod busybox -o wide -w")
	if env.File != "" {
		out.Printf("  sudo crictl --config %s/crictl.yaml ps --label io.kubernetes.pod.namespace=default", dirOf(env.File))
	}
	if onReady != nil {
		onReady(&lab{node: j, kubelet: k, env: env})
	}

	// 4. The sync loop, until Ctrl-C.
	if err := k.Run(ctx); err != nil {
		return err
	}
	out.Printf("stopped: pods keep running in %s (as when a kubelet restarts); the next run picks them up, or stops those whose pod is gone", info.RuntimeName)
	return nil
}

// internalIPs are the node's InternalIP addresses: the pods' hostIP.
func internalIPs(n *v1.Node) []string {
	var ips []string
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			ips = append(ips, a.Address)
		}
	}
	return ips
}

func dirOf(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			return path[:i]
		}
	}
	return "."
}
