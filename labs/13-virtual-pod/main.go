// Lab 13 is a node without containers: a pod bound to it is handled by
// our own logic and its status reported back, as a virtual kubelet does.
//
// The lab joins node lab-node-13 (as lab 05), watches the pods bound to
// it (lab 09) into the pod manager and hands each to the pod workers
// (lab 10). Where a kubelet has a CRI runtime and a PLEG, this node has a
// virtual runtime: each container's command is interpreted in this
// process — `http-get URL` — and every change of state is written into
// the pod cache and reported at once. The status manager (mycore/status)
// posts Pending → Running → Succeeded or Failed with each container's
// exit code and message, and deletes the pod for good once a deleted
// pod's work has stopped. The sync loop, the syncer and the virtual
// runtime are in virtualnode, a small teaching copy of the kubelet's.
//
//	go run ./labs/13-virtual-pod
//	kubectl apply -f labs/13-virtual-pod/readyz.yaml     # in another terminal
package main

import (
	"context"
	"errors"
	"flag"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubepod "k8s.io/kubernetes/pkg/kubelet/pod"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labnames"
	"kubelet-labs/internal/labnode"
	"kubelet-labs/labs/13-virtual-pod/virtualnode"
	"kubelet-labs/mycore/node"
	"kubelet-labs/mycore/podconfig"
	"kubelet-labs/mycore/podworkers"
	"kubelet-labs/mycore/status"
)

type options struct {
	kubeconfig   string
	nodeName     string
	timeout      time.Duration
	cacheTick    time.Duration
	statusSync   time.Duration
	housekeeping time.Duration
}

func main() {
	var o options
	labenv.Main(labenv.Lab{
		Name: "13-virtual-pod",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.kubeconfig, "kubeconfig", "", labenv.KubeconfigUsage)
			fs.StringVar(&o.nodeName, "node-name", labnames.Node13, "name of the node to join; pods bound to it (spec.nodeName) are run here")
			fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long the join may take (certificate issued, node Ready)")
			fs.DurationVar(&o.cacheTick, "cache-tick", 100*time.Millisecond, "how often the pod cache is declared complete (a PLEG does it once per relist, 1s)")
			fs.DurationVar(&o.statusSync, "status-sync", status.DefaultSyncPeriod, "the status manager's full reconcile period (kubelet: 10s)")
			fs.DurationVar(&o.housekeeping, "housekeeping", 2*time.Second, "how often gone pods are forgotten (kubelet: housekeepingPeriod)")
		},
		Check: o.check,
		Run:   func(ctx context.Context, out *labenv.Printer) error { return run(ctx, o, out, nil) },
	})
}

func (o *options) check() error {
	if o.timeout <= 0 || o.cacheTick <= 0 || o.statusSync <= 0 || o.housekeeping <= 0 {
		return errors.New("--timeout, --cache-tick, --status-sync and --housekeeping must be positive")
	}
	return labenv.CheckNodeName(o.nodeName)
}

// lab is what a test gets once everything is running.
type lab struct {
	node   *node.Joined
	status *status.Manager
	rt     *virtualnode.Runtime
}

func run(ctx context.Context, o options, out *labenv.Printer, onReady func(*lab)) error {
	cfg, err := labenv.RESTConfig(ctx, o.kubeconfig)
	if err != nil {
		return err
	}
	logf := out.Stamped

	// 1. A node, as lab 05 makes it; from here on we are system:node:NAME.
	j, err := labnode.Join(ctx, cfg, "13-virtual-pod", o.nodeName, o.timeout, out)
	if err != nil {
		return err
	}
	defer out.Printf("stopped: the Node and its pods stay in the apiserver; work still running here was cancelled")
	defer j.Stop()
	var hostIPs []string
	for _, a := range j.Node.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			hostIPs = append(hostIPs, a.Address)
		}
	}

	// 2. The "runtime": the interpreter runs each container's command; the
	// virtual runtime keeps every pod's state and writes each change into
	// the pod cache — the cache the pod workers wait on.
	in, err := virtualnode.NewInterpreter(j.Config, func(f string, a ...any) { logf("http-get "+f, a...) })
	if err != nil {
		return err
	}
	cache := kubecontainer.NewCache()
	rt := virtualnode.NewRuntime(cache, in.Run, logf)
	defer rt.Close()

	// 3. Pod manager, pod workers, status manager. The status manager asks
	// the workers whether a pod's containers could still run before it
	// posts a terminal phase or deletes the pod.
	pods := kubepod.NewBasicPodManager()
	syncer := &virtualnode.Syncer{Runtime: rt, HostIPs: hostIPs, Log: logf}
	workers, err := podworkers.New(podworkers.Options{Syncer: syncer, Cache: cache})
	if err != nil {
		return err
	}
	defer workers.Stop()
	statusMgr := status.NewManager(j.Client, workers, status.Options{SyncPeriod: o.statusSync, Log: logf, Pods: pods})
	syncer.Status = statusMgr

	var wg sync.WaitGroup
	defer wg.Wait() // runs after cancel (deferred next): both goroutines end with loopCtx
	loopCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() { rt.KeepCacheFresh(loopCtx, o.cacheTick) })
	wg.Go(func() { statusMgr.Run(loopCtx) })

	// 4. The pods bound to this node.
	updates := podconfig.Watch(loopCtx, j.Client, o.nodeName)
	out.Printf("node %s runs `http-get URL` as its only program; try, in another terminal:", o.nodeName)
	out.Printf("  kubectl apply -f labs/13-virtual-pod/readyz.yaml && kubectl get pod readyz -w")
	if onReady != nil {
		onReady(&lab{node: j, status: statusMgr, rt: rt})
	}

	// 5. The sync loop, until Ctrl-C: config updates and the runtime's
	// changes become UpdatePod calls; housekeeping forgets what is gone.
	loop := &virtualnode.Loop{Handlers: podworkers.Handlers{Pods: pods, Workers: workers}, Status: statusMgr, Runtime: rt, Log: logf}
	housekeeping := time.NewTicker(o.housekeeping)
	defer housekeeping.Stop()
	loop.Run(loopCtx, updates, housekeeping.C)
	cancel()
	for range updates { // the source closes it once its goroutines are gone
	}
	return nil
}
