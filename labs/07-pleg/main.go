// Lab 07 runs the kubelet's own PLEG — the Pod Lifecycle Event Generator,
// pleg.NewGenericPLEG from k8s.io/kubernetes v1.36.3 — over our
// kubecontainer.Runtime (mycore/runtime) on the mock CRI runtime.
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
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/pleg"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/runtime"
)

// The kubelet's values (pkg/kubelet/kubelet.go:205-216, v1.36.3).
const (
	plegChannelCapacity = 1000
	plegRelistPeriod    = time.Second
	plegRelistThreshold = 3 * time.Minute
)

type options struct {
	criEndpoint     string
	relistPeriod    time.Duration
	relistThreshold time.Duration
	steps, live     bool
}

func main() {
	var o options
	flag.StringVar(&o.criEndpoint, "cri-endpoint", "", "a mock CRI runtime to watch, e.g. lab 06's unix://…/mockcri.sock (default: start our own in the state folder)")
	flag.DurationVar(&o.relistPeriod, "relist-period", plegRelistPeriod, "how often the PLEG lists the runtime (kubelet: 1s)")
	flag.DurationVar(&o.relistThreshold, "relist-threshold", plegRelistThreshold, "PLEG is unhealthy when no relist finished for this long (kubelet: 3m)")
	flag.BoolVar(&o.steps, "steps", true, "first walk through four relists by hand on a fake clock")
	flag.BoolVar(&o.live, "live", true, "then run the PLEG every relist period and print its events until Ctrl-C")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout, nil); err != nil {
		labenv.Fatal(err)
	}
}

// run is the lab; onLive (tests) is called once the live PLEG runs.
func run(ctx context.Context, o options, w io.Writer, onLive func(*mock)) error {
	if o.relistPeriod <= 0 || o.relistThreshold <= o.relistPeriod {
		return fmt.Errorf("--relist-period=%s --relist-threshold=%s: want 0 < period < threshold", o.relistPeriod, o.relistThreshold)
	}
	// The PLEG logs through klog; keep its errors visible, on one line.
	klog.SetOutput(w)
	out := newPrinter(w)

	// 1. A container runtime: the mock, on a socket, with its control API —
	// the "something happened to a container" button.
	m, err := startMock(o.criEndpoint)
	if err != nil {
		return err
	}
	defer m.stop()
	c, err := cri.Dial(ctx, m.endpoint)
	if err != nil {
		return err
	}
	defer c.Close()
	out.printf("runtime   %s (%s)", m.endpoint, m.describe())
	// The kubelet pulls before it creates; the mock "pulls" instantly.
	if _, err := c.Images.PullImage(ctx, &runtimeapi.ImageSpec{Image: demoImage}, nil, nil); err != nil {
		return fmt.Errorf("pull %s: %w", demoImage, err)
	}

	if o.steps {
		if err := relistByHand(ctx, o, c, m, out); err != nil {
			return err
		}
	}
	if !o.live {
		return nil
	}
	return relistForever(ctx, o, runtime.New(c), c, m, out, onLive)
}

// relistByHand builds the PLEG on a fake clock and calls Relist() itself:
// one list, one diff, one batch of events at a time.
func relistByHand(ctx context.Context, o options, c *cri.Client, m *mock, out *printer) error {
	clk := testingclock.NewFakeClock(time.Now())
	rt := runtime.New(c, runtime.WithClock(clk)) // lists stamped by the same fake clock
	cache := observe(kubecontainer.NewCache(), out, clk)
	events := make(chan *pleg.PodLifecycleEvent, plegChannelCapacity)
	g := pleg.NewGenericPLEG(klog.Background(), rt, events,
		&pleg.RelistDuration{RelistPeriod: o.relistPeriod, RelistThreshold: o.relistThreshold}, cache, clk).(*pleg.GenericPLEG)
	d := newDiffer(rt, out, events)

	out.section("Part 1: one relist at a time (fake clock; GenericPLEG.Relist() called by hand)")
	if healthy, err := g.Healthy(); !healthy {
		out.printf("before any relist, Healthy() = false: %v", err)
	}

	d.relist(ctx, g, "relist #1: the runtime as it is")

	pod := demoPod("step")
	sb, sbCfg, err := c.RunPod(ctx, pod)
	if err != nil {
		return err
	}
	defer removePod(c, sb)
	app, err := c.StartContainer(ctx, sb, sbCfg, pod.ContainerConfig(cri.Container{Name: "app", Image: demoImage, Command: []string{"sh", "-c", "echo serving; sleep 3600"}}))
	if err != nil {
		return err
	}
	clk.Step(o.relistPeriod)
	d.relist(ctx, g, "relist #2: we ran a sandbox and started container app in it (CRI RunPodSandbox, CreateContainer, StartContainer)")

	if err := m.exit(ctx, app, 1); err != nil {
		return err
	}
	clk.Step(o.relistPeriod)
	d.relist(ctx, g, "relist #3: app's process exited with code 1 (the mock's control API; on a real node: a crash, the OOM killer)")

	if err := c.RemoveContainer(ctx, app); err != nil {
		return err
	}
	clk.Step(o.relistPeriod)
	d.relist(ctx, g, "relist #4: the exited container was removed (CRI RemoveContainer, as the kubelet's container GC does)")

	// No relist for longer than the threshold: what `kubectl describe node`
	// shows as "PLEG is not healthy" (the kubelet's runtime health check).
	clk.Step(o.relistThreshold + time.Second)
	healthy, err := g.Healthy()
	out.printf("\nthe clock moves %s with no relist (a runtime stuck in a list call would do this):", o.relistThreshold+time.Second)
	out.printf("  Healthy() = %v: %v", healthy, err)
	out.printf("  the kubelet's runtime check (pkg/kubelet/runtime.go:133) makes that \"PLEG is not healthy: %v\" and the node Ready=False", err)
	d.relist(ctx, g, "relist #5: one successful relist later")
	healthy, _ = g.Healthy()
	out.printf("  Healthy() = %v", healthy)
	return nil
}

// relistForever is the kubelet's way: Start() relists every period on the
// real clock; the sync loop reads the events channel (kubelet.go,
// syncLoopIteration's plegCh case).
func relistForever(ctx context.Context, o options, rt *runtime.Runtime, c *cri.Client, m *mock, out *printer, onLive func(*mock)) error {
	cache := observe(kubecontainer.NewCache(), out, clock.RealClock{})
	cache.quiet = true // live: the event lines say which cache entry they follow
	events := make(chan *pleg.PodLifecycleEvent, plegChannelCapacity)
	g := pleg.NewGenericPLEG(klog.Background(), rt, events,
		&pleg.RelistDuration{RelistPeriod: o.relistPeriod, RelistThreshold: o.relistThreshold}, cache, clock.RealClock{}).(*pleg.GenericPLEG)

	pod := demoPod("web")
	sb, sbCfg, err := c.RunPod(ctx, pod)
	if err != nil {
		return err
	}
	defer removePod(c, sb)
	var ids []string
	for _, name := range []string{"nginx", "sidecar"} {
		id, err := c.StartContainer(ctx, sb, sbCfg, pod.ContainerConfig(cri.Container{Name: name, Image: demoImage, Command: []string{"sh", "-c", "while true; do sleep 1; done"}}))
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}

	out.section(fmt.Sprintf("Part 2: the PLEG relisting every %s on the real clock (GenericPLEG.Start)", o.relistPeriod))
	g.Start()
	defer g.Stop()
	m.guide(out, sb, ids)
	if onLive != nil {
		onLive(m)
	}

	health := time.NewTicker(o.relistPeriod)
	defer health.Stop()
	wasHealthy := true
	for {
		select {
		case <-ctx.Done():
			out.printf("stopped: %s", context.Cause(ctx))
			return nil
		case ev := <-events:
			out.event(ev, cache)
		case <-health.C:
			// What the kubelet's runtime health check asks (kubelet.go,
			// updateRuntimeUp via the PLEG's Healthy).
			if ok, err := g.Healthy(); ok != wasHealthy {
				wasHealthy = ok
				out.printf("%s  Healthy() = %v %v", stamp(time.Now()), ok, errOrEmpty(err))
			}
		}
	}
}

func errOrEmpty(err error) string {
	if err == nil {
		return ""
	}
	return "(" + err.Error() + ")"
}
