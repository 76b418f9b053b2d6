// Lab 07 runs the kubelet's own PLEG — the Pod Lifecycle Event Generator,
// pleg.NewGenericPLEG from k8s.io/kubernetes v1.36.3 — over our
// kubecontainer.Runtime (mycore/plegruntime) on the mock CRI runtime.
//
// The PLEG is how the kubelet learns that something happened to a container
// it did not do itself: every relist period it lists all pods from the
// runtime, compares each container's state with the previous list, writes
// the changed pods' status into the pod cache and sends one event per
// change (ContainerStarted, ContainerDied, ContainerRemoved) to the sync
// loop.
//
//	go run ./labs/07-pleg                       # its own mock runtime
//	go run ./labs/07-pleg --cri-endpoint unix://$PWD/.labs/mockcri.sock   # lab 06's
//
// First it walks one relist at a time on a fake clock, printing the old
// and new state of every container; then it starts the PLEG for real and
// prints events as you change containers with crictl and the mock's
// control API. Ctrl-C stops it.
package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/pleg"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/state"
	"kubelet-labs/labs/07-pleg/plegview"
	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/plegruntime"
)

// The kubelet's values (pkg/kubelet/kubelet.go:205-216, v1.36.3).
const (
	plegChannelCapacity = 1000
	plegRelistPeriod    = time.Second
	plegRelistThreshold = 3 * time.Minute
)

type options struct {
	runtime         labruntime.Flags
	relistPeriod    time.Duration
	relistThreshold time.Duration
	steps, live     bool
}

func main() {
	var o options
	labenv.Main(labenv.Lab{
		Name: "07-pleg",
		Flags: func(fs *flag.FlagSet) {
			o.runtime.Register(fs, labruntime.Mock)
			fs.DurationVar(&o.relistPeriod, "relist-period", plegRelistPeriod, "how often the PLEG lists the runtime: the timer restarts after each relist (kubelet: 1s)")
			fs.DurationVar(&o.relistThreshold, "relist-threshold", plegRelistThreshold, "the PLEG is unhealthy when the last relist whose list call succeeded STARTED longer ago than this (generic.go Healthy; kubelet: 3m)")
			fs.BoolVar(&o.steps, "steps", true, "first walk through five relists by hand on a fake clock")
			fs.BoolVar(&o.live, "live", true, "then run the PLEG every relist period and print its events until Ctrl-C")
		},
		Check: o.check,
		Run:   func(ctx context.Context, out *labenv.Printer) error { return run(ctx, o, out, nil) },
	})
}

func (o *options) check() error {
	if o.runtime.Kind != labruntime.Mock {
		return fmt.Errorf("--runtime %s: this lab watches the mock CRI, whose control API makes containers die on demand; the PLEG over containerd is lab 12", o.runtime.Kind)
	}
	if o.relistPeriod <= 0 || o.relistThreshold <= o.relistPeriod {
		return fmt.Errorf("--relist-period=%s --relist-threshold=%s: want 0 < period < threshold", o.relistPeriod, o.relistThreshold)
	}
	return nil
}

// run is the lab; onLive (tests) is called once the live PLEG runs.
func run(ctx context.Context, o options, out *labenv.Printer, onLive func(*plegview.Mock)) error {
	if err := o.check(); err != nil {
		return err
	}
	dir, err := state.Ensure("07-pleg")
	if err != nil {
		return err
	}

	// 1. A container runtime: the mock, with its control API — the
	// "something happened to a container" button. Lab 06's must have one.
	if o.runtime.Endpoint != "" {
		if _, err := plegview.ControlSocket(o.runtime.Endpoint); err != nil {
			return err
		}
	}
	rt, err := labruntime.Open(ctx, labruntime.Options{Flags: o.runtime, Dir: dir})
	if err != nil {
		return err
	}
	defer rt.Close()
	m, err := plegview.NewMock(rt, dir)
	if err != nil {
		return err
	}
	defer m.Close()
	out.Printf("runtime   %s (%s)", m.Endpoint, m.Describe())

	if o.steps {
		if err := relistByHand(ctx, o, rt, m, dir, out); err != nil {
			return err
		}
	}
	if !o.live {
		return nil
	}
	return relistForever(ctx, o, rt, m, out, onLive)
}

// relistByHand builds the PLEG on a fake clock and calls Relist() itself:
// one list, one diff, one batch of events at a time.
func relistByHand(ctx context.Context, o options, rt *labruntime.Runtime, m *plegview.Mock, dir string, out *labenv.Printer) error {
	c := rt.CRI
	clk := testingclock.NewFakeClock(time.Now())
	kr := plegruntime.New(c, plegruntime.WithClock(clk)) // lists stamped by the same fake clock
	cache := plegview.Observe(kubecontainer.NewCache(), out)
	events := make(chan *pleg.PodLifecycleEvent, plegChannelCapacity)
	g := pleg.NewGenericPLEG(logger(out), kr, events,
		&pleg.RelistDuration{RelistPeriod: o.relistPeriod, RelistThreshold: o.relistThreshold}, cache, clk).(*pleg.GenericPLEG)
	d := plegview.NewDiffer(kr, out, events)

	plegview.Section(out, "Part 1: one relist at a time (fake clock; GenericPLEG.Relist() called by hand)")
	if healthy, err := g.Healthy(); !healthy {
		out.Printf("before any relist, Healthy() = false: %v", err)
	}

	d.Relist(ctx, g, "relist #1: the runtime as it is")

	pod := plegview.DemoPod("step")
	sb, sbCfg, err := c.RunPod(ctx, pod)
	if err != nil {
		return err
	}
	defer plegview.RemovePod(c, sb, out)
	app, err := c.StartContainer(ctx, sb, sbCfg, pod.ContainerConfig(cri.Container{Name: "app", Image: rt.Image, Command: []string{"sh", "-c", "echo serving; sleep 3600"}}))
	if err != nil {
		return err
	}
	clk.Step(o.relistPeriod)
	d.Relist(ctx, g, "relist #2: we ran a sandbox and started container app in it (CRI RunPodSandbox, CreateContainer, StartContainer)")

	if err := m.Exit(ctx, app, 1); err != nil {
		return err
	}
	clk.Step(o.relistPeriod)
	d.Relist(ctx, g, "relist #3: app's process exited with code 1 (the mock's control API; on a real node: a crash, the OOM killer)")

	if err := c.RemoveContainer(ctx, app); err != nil {
		return err
	}
	clk.Step(o.relistPeriod)
	d.Relist(ctx, g, "relist #4: the exited container was removed (CRI RemoveContainer, as the kubelet's container GC does)")

	// No relist for longer than the threshold: what `kubectl describe node`
	// shows as "PLEG is not healthy" (the kubelet's runtime health check).
	clk.Step(o.relistThreshold + time.Second)
	healthyAfterPause, err := g.Healthy()
	out.Printf("\nthe clock moves %s with no relist (a runtime stuck in a list call would do this):", o.relistThreshold+time.Second)
	out.Printf("  Healthy() = %v: %v", healthyAfterPause, err)
	out.Printf("  the kubelet's runtime check (pkg/kubelet/runtime.go:133) makes that \"PLEG is not healthy: %v\" and the node Ready=False", err)
	d.Relist(ctx, g, "relist #5: one successful relist later")
	healthy, _ := g.Healthy()
	out.Printf("  Healthy() = %v", healthy)
	return plegview.RecordPart1(dir, m, d.Sent, healthyAfterPause, healthy)
}

// relistForever is the kubelet's way: Start() relists every period on the
// real clock; the sync loop reads the events channel (kubelet.go,
// syncLoopIteration's plegCh case).
func relistForever(ctx context.Context, o options, rt *labruntime.Runtime, m *plegview.Mock, out *labenv.Printer, onLive func(*plegview.Mock)) error {
	c := rt.CRI
	cache := plegview.Observe(kubecontainer.NewCache(), out)
	cache.Quiet = true // live: the event lines say which cache entry they follow
	events := make(chan *pleg.PodLifecycleEvent, plegChannelCapacity)
	g := pleg.NewGenericPLEG(logger(out), plegruntime.New(c), events,
		&pleg.RelistDuration{RelistPeriod: o.relistPeriod, RelistThreshold: o.relistThreshold}, cache, clock.RealClock{}).(*pleg.GenericPLEG)

	pod := plegview.DemoPod("web")
	sb, sbCfg, err := c.RunPod(ctx, pod)
	if err != nil {
		return err
	}
	defer plegview.RemovePod(c, sb, out)
	var ids []string
	for _, name := range []string{"nginx", "sidecar"} {
		id, err := c.StartContainer(ctx, sb, sbCfg, pod.ContainerConfig(cri.Container{Name: name, Image: rt.Image, Command: []string{"sh", "-c", "while true; do sleep 1; done"}}))
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}

	plegview.Section(out, fmt.Sprintf("Part 2: the PLEG relisting every %s on the real clock (GenericPLEG.Start)", o.relistPeriod))
	g.Start()
	defer g.Stop()
	m.Guide(out, pod, rt.Image, sb, sbCfg, ids)
	if onLive != nil {
		onLive(m)
	}

	health := time.NewTicker(o.relistPeriod)
	defer health.Stop()
	wasHealthy := true
	for {
		select {
		case <-ctx.Done():
			if m.Ours {
				out.Printf("stopped: removing the demo pod, then our mock runtime")
			} else {
				out.Printf("stopped: removing the demo pod")
			}
			return nil
		case ev := <-events:
			cache.Event(ev)
		case <-health.C:
			// What the kubelet's runtime health check asks (kubelet.go,
			// updateRuntimeUp via the PLEG's Healthy).
			if ok, err := g.Healthy(); ok != wasHealthy {
				wasHealthy = ok
				out.Printf("%s  Healthy() = %v %v", plegview.Stamp(time.Now()), ok, errOrEmpty(err))
			}
		}
	}
}

// logger is where the PLEG's own log lines (a failed list, a failed
// status) go: the lab's output, each one a whole line.
func logger(out *labenv.Printer) klog.Logger {
	return textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(out)))
}

func errOrEmpty(err error) string {
	if err == nil {
		return ""
	}
	return "(" + err.Error() + ")"
}
