package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubelet-labs/hack/internal/benchkit"
	"kubelet-labs/internal/containerdenv"
	"kubelet-labs/internal/controlplane"
	"kubelet-labs/internal/state"
	"kubelet-labs/mycore/fleet"
)

// env is one benchmark's cluster, binaries and clients.
type env struct {
	o          options
	dir        string // the state folder's bench-kubelet/
	containerd containerdenv.Env
	cp         *controlplane.ControlPlane
	ownsCP     bool
	kubeconfig string
	cfg        *rest.Config
	admin      kubernetes.Interface
	version    string
	bins       map[string]string // kubelet → its binary
	driver     *driver
}

// labs are the two kubelets' programs.
var labs = map[string]string{kubeletReal: "./labs/01-fake-node", kubeletOurs: "./labs/18-mykubelet"}

func (e *env) setup(ctx context.Context, logf func(string, ...any)) error {
	var err error
	if e.dir = e.o.dir; e.dir == "" {
		if e.dir, err = state.Ensure("bench-kubelet"); err != nil {
			return err
		}
	}
	root, err := state.Root()
	if err != nil {
		return err
	}
	// The kubelets, built first and once: lab 01 compiles the whole real
	// kubelet (minutes when cold), and no control plane should idle
	// meanwhile. -buildvcs=false: the checkout may be another user's.
	kubeletNames := map[string]string{"real": "the real kubelet", "ours": "our kubelet"}
	e.bins = map[string]string{}
	for _, k := range e.o.list(e.o.kubelets) {
		bin := filepath.Join(e.dir, "bin", k+"-kubelet")
		logf("building %s (%s; minutes when cold) ...", labs[k], kubeletNames[k])
		build := exec.CommandContext(ctx, "go", "build", "-buildvcs=false", "-o", bin, labs[k])
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %w\n%s", labs[k], err, out)
		}
		e.bins[k] = bin
	}

	if e.o.cp != nil {
		e.cp = e.o.cp
	} else {
		binDir, err := state.Ensure("bin")
		if err != nil {
			return err
		}
		// A control plane of its own: no other agent's pods or nodes in
		// the numbers, and nothing left behind.
		e.cp, err = benchkit.StartControlPlane(ctx, controlplane.Config{
			Dir: filepath.Join(e.dir, "cp"), BinDir: binDir, ModuleRoot: root, Fresh: true, UnsafeNoFsync: e.o.noFsync,
		}, logf)
		if err != nil {
			return err
		}
		e.ownsCP = true
	}
	e.kubeconfig = e.cp.AdminKubeconfig()
	if e.cfg, err = e.cp.AdminConfig(); err != nil {
		return err
	}
	if e.admin, err = kubernetes.NewForConfig(e.cfg); err != nil {
		return err
	}
	if v, err := e.admin.Discovery().ServerVersion(); err == nil {
		e.version = v.GitVersion
	}
	e.driver, err = newDriver(e.cfg, e.o.qps, e.o.burst)
	return err
}

func (e *env) close() {
	if e.ownsCP && e.cp != nil {
		benchkit.StopControlPlane(e.cp, e.dir)
	}
}

// result is one run: one kubelet on one runtime in one round.
type result struct {
	kubelet, runtime string
	round            int
	running, ready   int // pods seen Running, and Ready
	gone             int // pods seen gone after their delete
	// v holds every measure of the table, by key (table.go's rows).
	v map[string]float64
	// cri is the proxy's count over the pods' life (first create → last
	// gone), by full method name.
	cri map[string]int64
	// How busy the machine was: the 1-minute load when the run started,
	// and whether it was above the threshold.
	loadBefore float64
	busy       bool
}

// runOne is one kubelet's whole run on one runtime: start it, Ready, idle,
// pods, delete, stop, clean up.
func (e *env) runOne(ctx context.Context, kubelet, rt string, round int, logf func(string, ...any)) (_ *result, err error) {
	o := e.o
	name := fmt.Sprintf("%sr%d-%s-%s", nsPrefix, round+1, kubelet, rt) // the node's and the namespace's
	dir := filepath.Join(e.dir, name)
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil { // 0700: the sockets in it are private from their first moment
		return nil, err
	}
	// Last of all, once the runtime and the proxy are stopped: the run's
	// folder goes (the kubelet's log kept beside the table), unless the
	// run failed once its kubelet had started, when all of it stays for a
	// look.
	started := false
	defer func() {
		_ = os.Rename(filepath.Join(dir, "kubelet.out"), filepath.Join(e.dir, name+".log"))
		if err != nil && started {
			logf("%s: its files stay in %s (the kubelet's output: %s)", name, dir, filepath.Join(e.dir, name+".log"))
			return
		}
		removeRunDir(dir, logf)
	}()
	r := &result{kubelet: kubelet, runtime: rt, round: round, v: map[string]float64{}}
	d := e.driver
	d.cleanup(ctx, name, name) // what an interrupted run may have left

	if rt == runtimeContainerd {
		if err := prepareContainerd(ctx, strings.TrimPrefix(e.containerd.Endpoint, "unix://")); err != nil {
			return nil, err
		}
	}
	b, err := openBackend(rt, dir, e.containerd)
	if err != nil {
		return nil, err
	}
	defer b.close()
	p, err := startProxy(filepath.Join(dir, "cri.sock"), b.socket)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	if err := d.EnsureNamespace(ctx, name); err != nil {
		return nil, err
	}

	args := []string{"--kubeconfig=" + e.kubeconfig, "--node-name=" + name, "--cri-endpoint=" + p.endpoint(), "--port=0"}
	if kubelet == kubeletOurs {
		runtimeFlag := "mock"
		if rt == runtimeContainerd {
			runtimeFlag = "containerd-" + flavour
		}
		// no live view: a server the real kubelet does not run
		args = append(args, "--runtime="+runtimeFlag, "--view=off", "--shutdown-grace-period=5s")
	}
	logf("%s kubelet on %s (round %d): node %s", kubelet, rt, round+1, name)
	lw := benchkit.WatchLoad(loadAvg1)
	defer lw.End()
	cp0, cm0CPU := benchkit.ControlPlaneCPU(e.cp)
	start := time.Now()
	// Its own state folder: certificates, pod folders and logs of this
	// run alone, removed after it.
	c, err := benchkit.StartChild(kubelet, filepath.Join(dir, "kubelet.out"), []string{"LABS_STATE_DIR=" + filepath.Join(dir, "state")}, e.bins[kubelet], args...)
	if err != nil {
		return nil, err
	}
	started = true
	// On containerd, someone else's pod appearing meanwhile stops the run
	// at once (SIGKILL: the real kubelet would stop that pod, as it stops
	// every pod of its runtime it does not run).
	var intruder atomic.Value
	problem := c.Exited
	stopGuard := func() {}
	if rt == runtimeContainerd {
		var gctx context.Context
		gctx, stopGuard = context.WithCancel(ctx)
		go guardContainerd(gctx, b.socket, 250*time.Millisecond, func(pod string) {
			intruder.Store(pod)
			_ = syscall.Kill(-c.Pid(), syscall.SIGKILL)
		})
		problem = func() error {
			if pod, ok := intruder.Load().(string); ok {
				return fmt.Errorf("someone else's pod %s appeared on containerd %s during the run: the kubelet was killed at once, before it could stop that pod (the real kubelet stops every pod of its runtime it does not run); run the benchmark when nobody else uses containerd", pod, flavour)
			}
			return c.Exited()
		}
	}
	stopped := false
	defer func() {
		stopGuard()
		if !stopped {
			c.Stop(30 * time.Second)
		}
		// Cleaned up even after Ctrl-C: the next run, and whoever uses
		// the cluster and containerd after the benchmark, find them empty.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
		defer cancel()
		d.cleanup(cctx, name, name)
		if rt == runtimeContainerd {
			if cerr := prepareContainerd(cctx, b.socket); cerr != nil {
				logf("%s: containerd not emptied: %v", name, cerr)
			}
		}
	}()

	if err := d.waitNodeReady(ctx, name, o.timeout, problem); err != nil {
		return nil, err
	}
	r.v[keyNodeReady] = time.Since(start).Seconds()
	_, cpuReady := c.Usage()

	// Idle: what the kubelet asks its runtime with nothing to do.
	idle0, t0 := p.counts(), time.Now()
	select {
	case <-time.After(o.idle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := problem(); err != nil {
		return nil, err
	}
	idle1 := p.counts()
	_, cpuIdle := c.Usage()
	secs := time.Since(t0).Seconds()
	r.v[keyListSandbox] = float64(idle1[methodListSandbox]-idle0[methodListSandbox]) / secs
	r.v[keyListContainers] = float64(idle1[methodListContainers]-idle0[methodListContainers]) / secs
	r.v[keyIdleCPU] = (cpuIdle - cpuReady).Seconds() / secs

	// The pods. The counters are read before the first create, when all
	// are Running and Ready (the creates' cost) and when all are gone
	// (the deletes'), each time less the benchmark's own requests and
	// the controller-manager's.
	snap := func() (counts, error) { return e.counters(ctx, p) }
	c0, err := snap()
	if err != nil {
		return nil, err
	}
	var c1 counts
	var midErr error
	pods, err := d.runPods(ctx, name, name, b.image, o.pods, o.timeout, problem, func() { c1, midErr = snap() }, logf)
	if err != nil {
		return nil, err
	}
	if midErr != nil {
		return nil, midErr
	}
	c2, err := snap()
	if err != nil {
		return nil, err
	}
	if err := problem(); err != nil {
		return nil, err // killed after the last pod was gone: the numbers are not a whole run's
	}
	rss, cpuEnd := c.Usage()
	anon, file := c.PeakParts()
	stopGuard() // before the kubelet's stop: the guard signals a live kubelet only
	c.Stop(30 * time.Second)
	stopped = true
	loadMean, loadPeak, machine, self := lw.End()
	cp1, cm1CPU := benchkit.ControlPlaneCPU(e.cp)

	r.running, r.ready, r.gone = pods.Counts()
	running, ready, gone := pods.Latencies()
	n := float64(o.pods)
	r.v[keyRunP50], r.v[keyRunP99] = percentile(running, 0.50), percentile(running, 0.99)
	r.v[keyReadyP50], r.v[keyReadyP99] = percentile(ready, 0.50), percentile(ready, 0.99)
	r.v[keyGoneP50] = percentile(gone, 0.50)
	r.v[keyAllUp] = pods.AllUp.Sub(pods.CreateStart).Seconds()
	r.v[keyAllGone] = pods.AllGone.Sub(pods.DeleteStart).Seconds()
	create, del := c1.minus(c0), c2.minus(c1)
	r.v[keyAPICreate], r.v[keyAPIDelete] = float64(create.requests())/n, float64(del.requests())/n
	r.v[keyPodsCreate] = float64(benchkit.OnResource(create.api, "pods")) / n
	r.v[keyPodsDelete] = float64(benchkit.OnResource(del.api, "pods")) / n
	r.v[keyEvents] = float64(benchkit.OnResource(create.api, "events")+benchkit.OnResource(del.api, "events")) / n
	r.v[keyCRICreate], r.v[keyCRIDelete] = float64(total(create.cri))/n, float64(total(del.cri))/n
	r.cri = sum(create.cri, del.cri)
	r.v[keyRunSandbox] = float64(r.cri[methodRunSandbox]) / n
	r.v[keyRSS] = float64(rss) / (1 << 20)
	r.v[keyRSSAnon], r.v[keyRSSFile] = float64(anon)/(1<<20), float64(file)/(1<<20)
	r.v[keyCPUPods] = (cpuEnd - cpuIdle).Seconds()
	r.v[keyCPUAll] = cpuEnd.Seconds()
	r.v[keyCPCPU] = (cp1 - cp0).Seconds()
	r.v[keyLoadMean], r.v[keyLoadPeak] = loadMean, loadPeak
	r.v[keyOthersCPU] = max(0, (machine - cpuEnd - (cp1 - cp0) - (cm1CPU - cm0CPU) - self).Seconds())
	_ = os.WriteFile(filepath.Join(e.dir, name+"-cri.txt"), []byte("# CRI calls at the proxy, first create → last pod gone\n"+methodCounts(r.cri)), 0o644)
	logf("%s: %d pods Running and Ready %.1fs after the first create (Running p50 %.0f ms); all gone %.1fs after the first delete; %.1f API requests and %.1f CRI calls per pod",
		name, o.pods, r.v[keyAllUp], r.v[keyRunP50]*1000, r.v[keyAllGone], r.v[keyAPICreate]+r.v[keyAPIDelete], r.v[keyCRICreate]+r.v[keyCRIDelete])
	return r, nil
}

// counts are the counters at one moment: the apiserver's, the
// benchmark's own client's, the controller-manager's and the proxy's.
type counts struct {
	api  map[fleet.Call]int64
	mine []fleet.CallCount
	cm   map[fleet.Call]int64
	cri  map[string]int64
}

func (e *env) counters(ctx context.Context, p *proxy) (counts, error) {
	var c counts
	var err error
	c.cri = p.counts()
	c.mine = e.driver.Calls.Counts()
	if c.api, err = benchkit.RequestTotals(ctx, e.admin); err != nil {
		return c, err
	}
	c.cm, err = benchkit.ControllerManagerTotals(ctx, e.cfg, e.cp.Config().ControllerManagerPort)
	return c, err
}

// phase is what happened between two counts.
type phase struct {
	api []fleet.CallCount // the apiserver's count, less the benchmark's own
	cm  int64             // of them the controller-manager's (it counts its own)
	cri map[string]int64
}

func (b counts) minus(a counts) phase {
	ph := phase{api: benchkit.Minus(b.api, a.api, benchkit.Delta(b.mine, a.mine)), cri: map[string]int64{}}
	ph.cm = fleet.Total(benchkit.Minus(b.cm, a.cm, nil))
	for k, v := range b.cri {
		if d := v - a.cri[k]; d > 0 {
			ph.cri[k] = d
		}
	}
	return ph
}

// requests are the kubelet's: every request but the benchmark's and the
// controller-manager's (the two counters are read a moment apart: never
// below zero).
func (ph phase) requests() int64 { return max(0, fleet.Total(ph.api)-ph.cm) }

const (
	methodListSandbox    = "/runtime.v1.RuntimeService/ListPodSandbox"
	methodListContainers = "/runtime.v1.RuntimeService/ListContainers"
	methodRunSandbox     = "/runtime.v1.RuntimeService/RunPodSandbox"
)

func total(m map[string]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}

func sum(a, b map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range a {
		out[k] += v
	}
	for k, v := range b {
		out[k] += v
	}
	return out
}

// percentile of sorted latencies, in seconds (0 for none).
func percentile(sorted []time.Duration, p float64) float64 {
	return benchkit.Percentile(sorted, p).Seconds()
}

// removeRunDir removes a run's folder, unless something is mounted in it
// (a kubelet's volume left behind): removing files through a mount would
// remove what it shows, and the folder is then left, named in the log.
func removeRunDir(dir string, logf func(string, ...any)) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		logf("%s left in place: %v", dir, err)
		return
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			logf("%s left in place: %s is mounted in it", dir, f[4])
			return
		}
	}
	os.RemoveAll(dir)
}
