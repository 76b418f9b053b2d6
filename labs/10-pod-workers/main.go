// Lab 10 is the kubelet's pod workers at work: one goroutine per pod that
// drives it through SyncPod → SyncTerminatingPod → SyncTerminatedPod, each
// step waiting until the PLEG has written a runtime state newer than the
// worker's last action into the pod cache.
//
// The lab joins node lab-node-10 (as lab 05), watches the pods bound to it
// (the apiserver source of lab 09) into the pod manager, and hands each to
// the pod workers (mycore/podworkers) the way the kubelet's sync loop does
// (teachloop: a small teaching copy of that loop, which prints every step).
// The runtime is the mock CRI (mylib/fakecri) in this process; the real
// PLEG relists it every second over mycore/plegruntime and fills the cache.
// The syncer prints what the kubelet would do and creates, stops and
// removes the pod's sandbox and containers in the mock.
//
//	go run ./labs/10-pod-workers
//	kubectl apply -f labs/10-pod-workers/oneshot.yaml     # in another terminal
package main

import (
	"context"
	"errors"
	"flag"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/pleg"
	kubepod "k8s.io/kubernetes/pkg/kubelet/pod"
	"k8s.io/utils/clock"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labnames"
	"kubelet-labs/internal/labnode"
	"kubelet-labs/internal/labrecord"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/labs/10-pod-workers/teachloop"
	"kubelet-labs/mycore/journal"
	"kubelet-labs/mycore/node"
	"kubelet-labs/mycore/plegruntime"
	"kubelet-labs/mycore/podconfig"
	"kubelet-labs/mycore/podworkers"
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
	view         string // --view: the live view's address, or off
}

func main() {
	var o options
	labenv.Main(labenv.Lab{
		Name: "10-pod-workers",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.kubeconfig, "kubeconfig", "", labenv.KubeconfigUsage)
			fs.StringVar(&o.nodeName, "node-name", labnames.Node10, "name of the node to join; pods bound to it (spec.nodeName) get pod workers")
			fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long the join may take (certificate issued, node Ready)")
			fs.DurationVar(&o.relist, "relist-period", time.Second, "PLEG relist period (kubelet: 1s, kubelet.go genericPlegRelistPeriod)")
			fs.DurationVar(&o.resync, "sync-frequency", podworkers.DefaultResyncInterval, "resync a pod this long after a good sync (kubelet: --sync-frequency)")
			fs.DurationVar(&o.backOff, "backoff", podworkers.DefaultBackOffPeriod, "retry a failed sync after this (kubelet: backOffPeriod)")
			fs.DurationVar(&o.housekeeping, "housekeeping", 2*time.Second, "how often finished workers are cleaned up (kubelet: housekeepingPeriod)")
			fs.BoolVar(&o.quiet, "quiet", false, "print a summary when the counts change instead of every step (for many pods)")
			labnode.RegisterView(fs, &o.view)
		},
		Check: o.check,
		Run:   func(ctx context.Context, out *labenv.Printer) error { return run(ctx, o, out, nil) },
	})
}

func (o *options) check() error {
	if o.timeout <= 0 || o.relist <= 0 || o.resync <= 0 || o.backOff <= 0 || o.housekeeping <= 0 {
		return errors.New("--timeout, --relist-period, --sync-frequency, --backoff and --housekeeping must be positive")
	}
	if err := labnode.CheckView(o.view); err != nil {
		return err
	}
	return labenv.CheckNodeName(o.nodeName)
}

// lab is what a test gets once everything is running.
type lab struct {
	node    *node.Joined
	mock    *fakecri.Server
	workers *podworkers.Workers
}

func run(ctx context.Context, o options, out *labenv.Printer, onReady func(*lab)) error {
	cfg, err := labenv.RESTConfig(ctx, o.kubeconfig)
	if err != nil {
		return err
	}

	// 1. A node, as lab 05 makes it; from here on we are system:node:NAME.
	j, err := labnode.Join(ctx, cfg, "10-pod-workers", o.nodeName, o.timeout, out)
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
	// socket in the node's state folder, and our client for it. Its
	// control API makes a container exit on demand.
	rt, err := labruntime.Open(ctx, labruntime.Options{Flags: labruntime.Flags{Kind: labruntime.Mock}, Dir: j.Dir})
	if err != nil {
		return err
	}
	defer rt.Close()
	out.Printf("%s (control API: %s)", rt.Describe, rt.Mock.ControlSocketPath())
	out.Printf("  its containers: %s ps -a", rt.Crictl)

	// 3. The PLEG: relists the runtime every period and writes each pod's
	// status into the pod cache — the cache every pod worker waits on.
	cache := kubecontainer.NewCache()
	events := make(chan *pleg.PodLifecycleEvent, 1000) // plegChannelCapacity, kubelet.go:205
	gen := pleg.NewGenericPLEG(klog.Background(), plegruntime.New(rt.CRI), events,
		&pleg.RelistDuration{RelistPeriod: o.relist, RelistThreshold: 3 * time.Minute}, cache, clock.RealClock{}).(*pleg.GenericPLEG)
	out.Printf("PLEG relists every %s into the pod cache", o.relist)

	// 4. The pod workers, with a syncer that acts on the mock, and the sync
	// loop that feeds them. Every step goes to the node's journal, which
	// the terminal prints (with --quiet: a summary instead of every step)
	// and the live view draws (--view).
	steps := journal.New(journal.Options{Node: o.nodeName})
	summary := (func(string, ...any))(nil)
	if o.quiet {
		summary = out.Stamped
	} else {
		steps.AddSink(journal.PrintSink(out.Stamped))
	}
	if addr := labnode.ViewAddress(o.view); addr != "" {
		v, err := labnode.ServeView(addr, "10-pod-workers", o.nodeName, steps, out)
		if err != nil {
			return err
		}
		defer v.Close()
	}
	loop := teachloop.New(teachloop.Options{Client: client, Pods: kubepod.NewBasicPodManager(), Journal: steps, Summary: summary})
	// Every step also goes to workers.log in the node's folder, for make
	// check LAB=10: the workers live only in this process, and what the
	// walk-through makes them do leaves no trace in the apiserver (the lab
	// posts no status) nor in the runtime (the mock ends with the lab).
	record, err := labrecord.Create(filepath.Join(j.Dir, "workers.log"))
	if err != nil {
		return err
	}
	defer record.Close()
	workers, err := podworkers.New(podworkers.Options{
		Syncer: &teachloop.Syncer{CRI: rt.CRI, Control: rt.Mock.ControlSocketPath(), Log: func(f string, a ...any) { steps.Printf(journal.Sync, f, a...) }},
		Cache:  cache, ResyncInterval: o.resync, BackOffPeriod: o.backOff,
		OnEvent: func(e podworkers.Event) {
			loop.OnWorkerEvent(e)
			record.Line("%s worker    %s", time.Now().Format("15:04:05.000"), e)
		},
	})
	if err != nil {
		return err
	}
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
		onReady(&lab{node: j, mock: rt.Mock, workers: workers})
	}

	// 6. The sync loop: config updates, PLEG events and housekeeping, each
	// turned into UpdatePod calls, until Ctrl-C.
	housekeeping := time.NewTicker(o.housekeeping)
	defer housekeeping.Stop()
	loop.Run(ctx, workers, updates, events, housekeeping.C)
	for range updates { // the source closes it once its goroutines are gone
	}
	out.Printf("stopped: the Node and its pods stay in the apiserver; the mock runtime and its containers are gone")
	return nil
}
