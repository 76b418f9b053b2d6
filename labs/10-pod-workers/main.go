// Lab 10 is the kubelet's pod workers at work: one goroutine per pod that
// drives it through SyncPod → SyncTerminatingPod → SyncTerminatedPod, each
// step waiting until the PLEG has written a runtime state newer than the
// worker's last action into the pod cache.
//
// The lab joins node lab-node-10 (as lab 05), watches the pods bound to it
// (the apiserver source of lab 09) into the pod manager, and hands each to
// the pod workers (mycore/podworkers) the way the kubelet's handlers do.
// The runtime is the mock CRI (mylib/fakecri) in this process; the real
// PLEG relists it every second over mycore/runtime and fills the cache.
// The syncer prints what the kubelet would do and creates, stops and
// removes the pod's sandbox and containers in the mock.
//
//	go run ./labs/10-pod-workers
//	kubectl apply -f labs/10-pod-workers/oneshot.yaml     # in another terminal
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/pleg"
	kubepod "k8s.io/kubernetes/pkg/kubelet/pod"
	"k8s.io/utils/clock"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/node"
	"kubelet-labs/mycore/podconfig"
	"kubelet-labs/mycore/podworkers"
	"kubelet-labs/mycore/runtime"
	"kubelet-labs/mylib/fakecri"
)

type options struct {
	kubeconfig   string
	nodeName     string
	timeout      time.Duration
	relist       time.Duration
	resync       time.Duration
	backOff      time.Duration
	housekeeping time.Duration
	quiet        bool
}

func main() {
	// Our own flag set: importing package kubelet (for the pod workers'
	// option types) registers cAdvisor's flags on flag.CommandLine, and
	// -h should list only this lab's.
	fs := flag.NewFlagSet("10-pod-workers", flag.ExitOnError)
	var o options
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "admin kubeconfig: the server, its CA, and who makes the bootstrap token (default: $KUBECONFIG, else the state folder's admin.kubeconfig)")
	fs.StringVar(&o.nodeName, "node-name", "lab-node-10", "name of the node to join; pods bound to it (spec.nodeName) get pod workers")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long the join may take (certificate issued, node Ready)")
	fs.DurationVar(&o.relist, "relist-period", time.Second, "PLEG relist period (kubelet: 1s, kubelet.go genericPlegRelistPeriod)")
	fs.DurationVar(&o.resync, "sync-frequency", podworkers.DefaultResyncInterval, "resync a pod this long after a good sync (kubelet: --sync-frequency)")
	fs.DurationVar(&o.backOff, "backoff", podworkers.DefaultBackOffPeriod, "retry a failed sync after this (kubelet: backOffPeriod)")
	fs.DurationVar(&o.housekeeping, "housekeeping", 2*time.Second, "how often finished workers are cleaned up (kubelet: housekeepingPeriod)")
	fs.BoolVar(&o.quiet, "quiet", false, "print a summary when the counts change instead of every step (for many pods)")
	_ = fs.Parse(os.Args[1:]) // ExitOnError: a bad flag exits 2 with the usage

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout, nil); err != nil {
		labenv.Fatal(err)
	}
}

// lab is what a test gets once everything is running.
type lab struct {
	node    *node.Joined
	mock    *fakecri.Server
	cri     *cri.Client
	workers *podworkers.Workers
	pods    kubepod.Manager
}

func run(ctx context.Context, o options, w io.Writer, onReady func(*lab)) error {
	out := labenv.NewPrinter(w)
	if o.timeout <= 0 || o.relist <= 0 || o.resync <= 0 || o.backOff <= 0 || o.housekeeping <= 0 {
		return fmt.Errorf("--timeout, --relist-period, --sync-frequency, --backoff and --housekeeping must be positive")
	}
	cfg, err := labenv.RESTConfig(ctx, o.kubeconfig)
	if err != nil {
		return err
	}

	// 1. A node, as lab 05 makes it; from here on we are system:node:NAME.
	out.Printf("joining %s as node %s", cfg.Host, o.nodeName)
	dir, err := labenv.NodeDir(o.nodeName)
	if err != nil {
		return err
	}
	j, err := node.Join(ctx, node.JoinOptions{Admin: cfg, Dir: dir, Name: o.nodeName, Lab: "10-pod-workers", Timeout: o.timeout,
		Log: out.Indented()})
	if err != nil {
		return err
	}
	defer j.Stop()
	// The kubelet talks to the apiserver at 50 requests/s, bursts of 100
	// (kubeAPIQPS, kubeAPIBurst: apis/config/v1beta1/defaults.go:221-225);
	// client-go's default of 5/s would make deleting many pods crawl.
	nodeCfg := rest.CopyConfig(j.Config)
	nodeCfg.QPS, nodeCfg.Burst = 50, 100
	client, err := kubernetes.NewForConfig(nodeCfg)
	if err != nil {
		return err
	}

	// 2. The container runtime: the mock CRI, served in this process on a
	// socket in the node's state folder, and our client for it.
	mock, err := fakecri.Start(filepath.Join(j.Dir, "mockcri.sock"))
	if err != nil {
		return err
	}
	defer mock.Stop()
	crc, err := cri.Dial(ctx, mock.Endpoint())
	if err != nil {
		return err
	}
	defer crc.Close()
	out.Printf("mock CRI runtime on %s (control API: %s)", mock.Endpoint(), mock.ControlSocketPath())

	// 3. The PLEG: relists the runtime every period and writes each pod's
	// status into the pod cache — the cache every pod worker waits on.
	cache := kubecontainer.NewCache()
	events := make(chan *pleg.PodLifecycleEvent, 1000) // plegChannelCapacity, kubelet.go:205
	gen := pleg.NewGenericPLEG(klog.Background(), runtime.New(crc), events,
		&pleg.RelistDuration{RelistPeriod: o.relist, RelistThreshold: 3 * time.Minute}, cache, clock.RealClock{}).(*pleg.GenericPLEG)
	out.Printf("PLEG relists every %s into the pod cache", o.relist)

	// 4. The pod workers, with a syncer that acts on the mock.
	printf := out.Printf
	if o.quiet {
		printf = func(string, ...any) {}
	}
	stamped := func(f string, a ...any) { printf(time.Now().Format("15:04:05.000")+" "+f, a...) }
	k := &miniKubelet{
		client: client, pods: kubepod.NewBasicPodManager(), printf: stamped,
		say:      out.Stamped,
		finished: make(chan podworkers.Event, 1000),
	}
	workers, err := podworkers.New(podworkers.Options{
		Syncer: &labSyncer{cri: crc, control: mock.ControlSocketPath(), printf: stamped},
		Cache:  cache, ResyncInterval: o.resync, BackOffPeriod: o.backOff,
		OnEvent: k.onWorkerEvent,
	})
	if err != nil {
		return err
	}
	k.workers = workers
	gen.Start()
	// Stop order: the workers (they call the runtime), then the PLEG.
	defer gen.Stop()
	defer workers.Stop()

	// 5. The pods bound to this node, as lab 09 watches them.
	updates := podconfig.Watch(ctx, j.Client, o.nodeName)
	out.Printf("pod workers: resync every %s, back-off %s; watching pods with spec.nodeName=%s. Try, in another terminal:", o.resync, o.backOff, o.nodeName)
	out.Printf("  kubectl apply -f labs/10-pod-workers/oneshot.yaml")
	out.Printf("  kubectl apply -f labs/10-pod-workers/slowstop.yaml && kubectl delete pod slowstop --wait=false")
	if onReady != nil {
		onReady(&lab{node: j, mock: mock, cri: crc, workers: workers, pods: k.pods})
	}

	// 6. The sync loop.
	housekeeping := time.NewTicker(o.housekeeping)
	defer housekeeping.Stop()
	k.syncLoop(ctx, updates, events, housekeeping.C, o.quiet)
	for range updates { // the source closes it once its goroutines are gone
	}
	out.Printf("stopped: the Node and its pods stay in the apiserver; the mock runtime and its containers are gone")
	return nil
}
