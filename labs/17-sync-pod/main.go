// Lab 17 is the kubelet's syncPod in full: each sync computes what to do
// (computePodActions: a new sandbox? which containers to kill, and why?
// which to start?) and then does it, with restarts per the restart policy
// behind the crash-loop back-off, and liveness, readiness and startup
// probes run by a probe manager of its own.
//
// The node (lab-node-17) is chapter 3's (mycore/kubelet); what this lab
// adds lives in mycore/kuberuntime (actions.go, sync.go) and mycore/prober.
// This file starts them in the kubelet's order and says what to try.
//
//	sudo go run ./labs/17-sync-pod                  # on containerd
//	go run ./labs/17-sync-pod --runtime mock        # on the mock CRI
//	kubectl apply -f labs/17-sync-pod/liveness.yaml # in another terminal
package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/state"
	"kubelet-labs/mycore/kubelet"
	"kubelet-labs/mycore/node"
	"kubelet-labs/mylib/fakecri"
)

type options struct {
	kubeconfig  string
	nodeName    string
	runtime     string
	endpoint    string
	podLogsDir  string
	timeout     time.Duration
	relist      time.Duration
	backOffInit time.Duration
	backOffMax  time.Duration
}

// The crash-loop back-off of this lab: fast, so a minute shows the
// doubling (1 s, 2 s, 4 s, 8 s, 16 s). The kubelet's: 10 s to 5 min.
const (
	labBackOffInitial = time.Second
	labBackOffMax     = 16 * time.Second
)

func main() {
	// Our own flag set: package kubelet (imported for its types) registers
	// cAdvisor's flags on flag.CommandLine; -h should list only ours.
	fs := flag.NewFlagSet("17-sync-pod", flag.ExitOnError)
	var o options
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "admin kubeconfig: the server, its CA, and who makes the bootstrap token (default: $KUBECONFIG, else the state folder's admin.kubeconfig)")
	fs.StringVar(&o.nodeName, "node-name", "lab-node-17", "name of the node to join; pods bound to it (spec.nodeName) run here")
	fs.StringVar(&o.runtime, "runtime", labruntime.Containerd, "container runtime: "+strings.Join(labruntime.Kinds(), ", ")+" (containerd: the course's, started by scripts/containerd-up.sh, the instance it named first; needs root. mock: the mock CRI, in this process: exec probes only)")
	fs.StringVar(&o.endpoint, "cri-endpoint", "", "with a containerd --runtime: its endpoint (default: the state folder's containerd/env, or $CONTAINER_RUNTIME_ENDPOINT)")
	fs.StringVar(&o.podLogsDir, "pod-logs-dir", "", "where container logs go (default: containerd's POD_LOG_DIR, or the node's folder with the mock)")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long the join may take (certificate issued, node Ready)")
	fs.DurationVar(&o.relist, "relist-period", kubelet.DefaultRelistPeriod, "PLEG relist period (kubelet: 1s)")
	fs.DurationVar(&o.backOffInit, "backoff-initial", labBackOffInitial, "crash-loop back-off of the first restart that waits (kubelet: 10s)")
	fs.DurationVar(&o.backOffMax, "backoff-max", labBackOffMax, "longest crash-loop back-off (kubelet: 5m)")
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
	rt      *labruntime.Runtime
}

func run(ctx context.Context, o options, w io.Writer, onReady func(*lab)) error {
	out := labenv.NewPrinter(w)
	if o.timeout <= 0 || o.relist <= 0 || o.backOffInit <= 0 || o.backOffMax < o.backOffInit {
		return errors.New("--timeout, --relist-period and --backoff-initial must be positive, --backoff-max at least --backoff-initial")
	}
	if err := labenv.CheckNodeName(o.nodeName); err != nil {
		return err
	}

	// 1. The runtime first: without it the node would join and then run nothing.
	dir, err := state.Ensure("nodes", o.nodeName)
	if err != nil {
		return err
	}
	// On the mock, the exec probes' /tmp is tmpFS (mocktmp.go).
	rt, err := labruntime.Open(ctx, labruntime.Options{Flags: labruntime.Flags{Kind: o.runtime, Endpoint: o.endpoint, PodLogsDir: o.podLogsDir},
		Dir: dir, Mock: []fakecri.Option{fakecri.WithExecHook(newTmpFS().exec)}})
	if err != nil {
		return err
	}
	defer rt.Close()
	out.Printf("runtime: %s", rt.Describe)

	// 2. The node, as lab 05 makes it; from here on we are system:node:NAME.
	cfg, err := labenv.RESTConfig(ctx, o.kubeconfig)
	if err != nil {
		return err
	}
	out.Printf("joining %s as node %s", cfg.Host, o.nodeName)
	j, err := node.Join(ctx, node.JoinOptions{Admin: cfg, Dir: dir, Name: o.nodeName, Lab: "17-sync-pod", Timeout: o.timeout,
		Log: out.Indented()})
	if err != nil {
		return err
	}
	defer j.Stop()

	// 3. The kubelet: chapter 3's node, now with computePodActions deciding
	// each sync and a probe manager feeding it.
	k, err := kubelet.New(kubelet.Options{
		NodeName: o.nodeName, Client: j.Client, CRI: rt.CRI, PodLogsDir: rt.PodLogsDir,
		HostIPs: internalIPs(j.Node), RelistPeriod: o.relist,
		BackOffInitial: o.backOffInit, BackOffMax: o.backOffMax, Log: out.Stamped,
	})
	if err != nil {
		return err
	}
	out.Printf("crash-loop back-off %s doubling to %s (the kubelet's: 10s to 5m); PLEG relist every %s", o.backOffInit, o.backOffMax, o.relist)
	hints(out, o, rt)
	if onReady != nil {
		onReady(&lab{node: j, kubelet: k, rt: rt})
	}

	// 4. The sync loop, until Ctrl-C.
	if err := k.Run(ctx); err != nil {
		return err
	}
	out.Printf("stopped: pods keep running in the runtime (as when a kubelet restarts)")
	return nil
}

// hints prints what to try, with this runtime's crictl and image ID.
func hints(out *labenv.Printer, o options, rt *labruntime.Runtime) {
	out.Printf("Pods with spec.nodeName=%s run here. Try, in another terminal (pods in labs/17-sync-pod/):", o.nodeName)
	out.Printf("  kubectl apply -f labs/17-sync-pod/liveness.yaml -f labs/17-sync-pod/readiness.yaml -f labs/17-sync-pod/startup.yaml -f labs/17-sync-pod/crashloop.yaml")
	if rt.Mock == nil {
		out.Printf("  kubectl apply -f labs/17-sync-pod/web.yaml          # HTTP and TCP probes against the pod IP")
	}
	out.Printf("  kubectl get pods -o wide -w")
	out.Printf("Change what the exec probes see, in a container of pod P:")
	out.Printf("  CRICTL=%q", rt.Crictl)
	out.Printf("  $CRICTL exec $($CRICTL ps -q --name app --label io.kubernetes.pod.name=P) touch /tmp/sick")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The pods' busybox: the course's containerd image, whose name the mock's carries.
	if st, err := rt.CRI.Images.ImageStatus(rt.CRI.Context(ctx), &runtimeapi.ImageSpec{Image: labruntime.BusyboxImage}, false); err == nil && st.GetImage() != nil {
		out.Printf("The same busybox by its ID is another image string, so another spec hash (a restart):")
		out.Printf("  kubectl set image pod/liveness app=%s", st.GetImage().GetId())
	}
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
