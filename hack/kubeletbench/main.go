// Kubeletbench sets our kubelet (lab 18) beside the real one (lab 01:
// kubelet v1.36.3) on the same machine, the same control plane and the
// same runtime, one after the other in alternating rounds, and prints one
// table with a column per kubelet and runtime:
//
//	go run ./hack/kubeletbench                        # 100 pods, 3 rounds, containerd 2.2 and the mock
//	go run ./hack/kubeletbench --runtimes mock --pods 20 --rounds 1   # a quick one, no root
//
// Each run: one node → Ready; an idle spell (how often the kubelet lists
// its runtime with nothing to do); --pods busybox pods bound to the node
// (a readiness probe on every other one) → all Running and Ready; every
// pod deleted → all gone. Both kubelets run as child processes, so their
// memory and CPU come from /proc the same way (hack/internal/benchkit);
// their API requests are counted by the apiserver, and their CRI calls by
// a proxy in front of the runtime (proxy.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"kubelet-labs/hack/internal/benchkit"
	"kubelet-labs/internal/controlplane"
)

const (
	kubeletReal = "real"
	kubeletOurs = "ours"
)

type options struct {
	pods     int
	runtimes string
	kubelets string
	idle     time.Duration
	timeout  time.Duration
	qps      float64
	burst    int
	out      string
	noFsync  bool
	// --rounds, and the machine's load (--max-load, --allow-busy,
	// --quiet-wait): benchkit's, as fleetbench's
	benchkit.RoundFlags
	benchkit.LoadFlags
	// cp, in tests, is the control plane to run on (not stopped at the end).
	cp *controlplane.ControlPlane
	// dir, in tests, replaces the state folder's bench-kubelet/.
	dir string
}

func main() {
	fs := flag.NewFlagSet("kubeletbench", flag.ExitOnError)
	var o options
	fs.IntVar(&o.pods, "pods", 100, "pods per run, all bound to the one node (at most 110, the kubelet's maxPods)")
	o.RoundFlags.Register(fs, "rounds; each runs every kubelet on every runtime, in another order (real,ours; ours,real; ...), and the table shows the median of the rounds with the lowest and highest")
	fs.StringVar(&o.runtimes, "runtimes", "containerd,mock", "runtimes, in this order: containerd (the course's containerd 2.2, started by `sudo scripts/containerd-up.sh`; needs root) and mock (mylib/fakecri, served by the benchmark)")
	fs.StringVar(&o.kubelets, "kubelets", "real,ours", "kubelets: real (lab 01, kubelet v1.36.3) and ours (lab 18)")
	fs.DurationVar(&o.idle, "idle", 10*time.Second, "after the node is Ready, how long the kubelet idles before the pods come; its runtime calls then are the relists. At least the readiness probe's period (10 s): a probe worker that starts sooner after the kubelet waits a random part of it (prober/worker.go:165-166, v1.36.3)")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "longest wait for each step (node Ready, pods Running and Ready, pods gone)")
	fs.Float64Var(&o.qps, "qps", 100, "the benchmark's own client (creates and deletes the pods): requests per second")
	fs.IntVar(&o.burst, "burst", 100, "burst of that client")
	fs.StringVar(&o.out, "out", "", "also write the table here (default: bench-kubelet/result.txt in the state folder)")
	o.LoadFlags.Register(fs, benchkit.LoadHelp{
		MaxLoad:   "a 1-minute load above this per core is a busy machine: refused before the start, waited for before each run",
		QuietWait: "before each run, wait this long at most for the load to fall under --max-load",
	})
	fs.BoolVar(&o.noFsync, "etcd-unsafe-no-fsync", false, "the private control plane's etcd skips fsync (faster on slow disks)")
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "error: unexpected argument %q (flags only; see -h)\n", fs.Arg(0))
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	_, err := run(ctx, o, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func (o options) list(s string) []string { return strings.Split(s, ",") }

func (o options) check() error {
	if o.pods < 1 || o.pods > 110 {
		return fmt.Errorf("--pods %d: must be 1 to 110 (the kubelet's maxPods)", o.pods)
	}
	if err := o.RoundFlags.Check(); err != nil {
		return err
	}
	switch {
	case o.qps <= 0 || o.burst < 1:
		return errors.New("--qps must be positive and --burst at least 1")
	case o.timeout <= 0:
		return errors.New("--timeout must be positive")
	case o.idle < time.Second:
		return fmt.Errorf("--idle %s: must be at least 1s", o.idle)
	}
	if err := o.LoadFlags.Check(); err != nil {
		return err
	}
	for _, r := range o.list(o.runtimes) {
		if r != runtimeContainerd && r != runtimeMock || strings.Count(o.runtimes, r) > 1 {
			return fmt.Errorf("--runtimes %q: a list of containerd and mock, each once", o.runtimes)
		}
	}
	for _, k := range o.list(o.kubelets) {
		if k != kubeletReal && k != kubeletOurs || strings.Count(o.kubelets, k) > 1 {
			return fmt.Errorf("--kubelets %q: a list of real and ours, each once", o.kubelets)
		}
	}
	return nil
}

// loadAvg1 reads the 1-minute load; a test replaces it.
var loadAvg1 = benchkit.ProcLoadAvg1

// run is the whole benchmark; it returns the results in the order run.
func run(ctx context.Context, o options, w io.Writer) ([]*result, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	logf := func(f string, a ...any) { fmt.Fprintf(w, time.Now().Format("15:04:05")+" "+f+"\n", a...) }
	e := &env{o: o}
	if slices.Contains(o.list(o.runtimes), runtimeContainerd) {
		var err error
		if e.containerd, err = checkContainerd(); err != nil {
			return nil, err
		}
	}
	// A busy machine is refused before anything starts, unless --allow-busy.
	if err := o.CheckQuiet(loadAvg1, ""); err != nil {
		return nil, err
	}
	if err := e.setup(ctx, logf); err != nil {
		e.close()
		return nil, err
	}
	defer e.close()

	// Round r starts with the r-th kubelet: neither always runs first (on
	// a fresh control plane, a cold page cache) or always after the other.
	// A run that fails is named under the table; the others keep theirs.
	var results []*result
	var failed []string
	out := o.out
	if out == "" {
		out = filepath.Join(e.dir, "result.txt")
	}
	done, total := 0, o.Rounds*len(o.list(o.runtimes))*len(o.list(o.kubelets))
	for round := range o.Rounds {
		for _, rt := range o.list(o.runtimes) {
			for _, k := range benchkit.RoundOrder(o.list(o.kubelets), round) {
				load, busy := o.WaitQuiet(ctx, loadAvg1, logf)
				r, err := e.runOne(ctx, k, rt, round, logf)
				if err != nil {
					if ctx.Err() != nil {
						return results, fmt.Errorf("%s kubelet on %s: %w", k, rt, err)
					}
					first, _, _ := strings.Cut(err.Error(), "\n")
					logf("%s kubelet on %s FAILED: %v", k, rt, err)
					failed = append(failed, fmt.Sprintf("%s kubelet on %s, round %d: %s", k, rt, round+1, first))
					continue
				}
				r.loadBefore, r.busy = load, busy
				results = append(results, r)
				// The table so far, after every run: a long benchmark
				// stopped half way still leaves its numbers.
				done++
				if done < total {
					partial := fmt.Sprintf("PARTIAL: %d of %d runs done\n", done, total) + formatTable(o, e, results, failed)
					_ = os.WriteFile(out, []byte(partial), 0o644)
				}
			}
		}
	}

	table := formatTable(o, e, results, failed)
	fmt.Fprintln(w)
	fmt.Fprint(w, table)
	if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
		return results, err
	}
	fmt.Fprintf(w, "\nwritten to %s\n", out)
	if len(failed) > 0 {
		return results, fmt.Errorf("%d runs failed: %s", len(failed), strings.Join(failed, "; "))
	}
	return results, nil
}
