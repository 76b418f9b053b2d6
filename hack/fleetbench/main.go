// Fleetbench is lab 18's benchmark: a tool beside the course, not a step of
// it. It runs KWOK v0.7.0 and our fleet mode (go run ./labs/18-mykubelet
// --nodes N) one after the other against the same control plane, drives
// both the same way, and prints one table, KWOK beside ours:
//
//	go run ./hack/fleetbench                        # 1,000 nodes, 10,000 pods
//	go run ./hack/fleetbench --nodes 50 --pods 500  # a quick one
//
// Each tool runs --rounds times (3), in alternating order, and the table
// shows medians with the spread; the machine's load is measured before
// and during each tool, and a busy machine is refused (see load.go).
//
// Fleet mode runs twice: as the nodes (each request impersonates
// system:node:NAME, so the Node authorizer checks it and priority and
// fairness queues it as a kubelet's), and as the admin, as KWOK does
// (exempt from both) — the difference is what being checked costs.
//
// For each tool: N nodes → all Ready with a Lease; M pods bound
// round-robin (spec.nodeName, no scheduler) → all Running; every pod
// deleted (one DELETE each, default grace, like kubectl delete pods --all)
// → all gone; meanwhile, how often a node stopped being Ready. Both tools
// run as child processes, so their memory and CPU come from /proc the same
// way. KWOK's API calls are counted from the apiserver's own
// apiserver_request_total; ours the same way, and by the fleet itself.
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
	"strings"
	"syscall"
	"time"

	"kubelet-labs/hack/internal/benchkit"
	"kubelet-labs/internal/controlplane"
)

type options struct {
	kubeconfig string
	nodes      int
	pods       int
	qps        float64
	burst      int
	fleetQPS   float64
	tools      string
	timeout    time.Duration
	out        string
	noFsync    bool
	fleetFlags string
	// --rounds, and the machine's load (--max-load, --allow-busy,
	// --quiet-wait): benchkit's, as kubeletbench's
	benchkit.RoundFlags
	benchkit.LoadFlags
	// cp, in tests, is the control plane to run on (not stopped at the end).
	cp *controlplane.ControlPlane
	// dir, in tests, replaces the state folder's bench-18/ (logs, the
	// fleet's binary and stats): a test must not write over a real run's.
	dir string
}

func main() {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	var o options
	fs.IntVar(&o.nodes, "nodes", 1000, "nodes per tool")
	fs.IntVar(&o.pods, "pods", 10000, "pods per tool, bound round-robin to its nodes")
	// 1,000: well above what either tool keeps up with on two cores, so
	// the table measures the tools, not the driver (at 200 both were at
	// the driver's pace: 10,000 creates in 50 s; issue 41)
	fs.Float64Var(&o.qps, "qps", 1000, "the benchmark's own client (creates nodes for KWOK, creates and deletes pods): requests per second")
	fs.IntVar(&o.burst, "burst", 1000, "burst of that client")
	fs.Float64Var(&o.fleetQPS, "fleet-qps", -1, "fleet mode's client-side limit (--kube-api-qps); negative: none, the same as KWOK v0.7.0, whose client has no limit")
	fs.StringVar(&o.tools, "tools", "kwok,fleet,fleet-shared", "which tools to run, in this order: kwok; fleet (our nodes, each acting as system:node:NAME); fleet-shared (our nodes acting as the admin, as KWOK does)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "longest wait for each step (nodes Ready, pods Running, pods gone)")
	fs.StringVar(&o.out, "out", "", "also write the table here (default: bench-18/result.txt in the state folder)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "use this cluster instead of a private control plane started for the run (its other pods and nodes then share the apiserver)")
	fs.StringVar(&o.fleetFlags, "fleet-flags", "", "more flags for the fleet, space-separated (e.g. \"--relist-period=2s --pprof-addr=127.0.0.1:6060\"; the profiler's URL, with its secret path, is in the tool's log, bench-18/fleet.log or fleet-shared.log in the state folder)")
	o.RoundFlags.Register(fs, "rounds of every tool; each round runs them in another order (kwok,fleet; fleet,kwok; ...), and the table shows the median of the rounds with the lowest and highest")
	o.LoadFlags.Register(fs, benchkit.LoadHelp{
		MaxLoad:   "a 1-minute load above this per core is a busy machine: refused before the start, waited for before each tool",
		QuietWait: "before each tool, wait this long at most for the load to fall under --max-load (the tool before leaves it high for a minute or two)",
	})
	fs.BoolVar(&o.noFsync, "etcd-unsafe-no-fsync", false, "private control plane: etcd skips fsync (faster on slow disks; lab 00 keeps fsync)")
	_ = fs.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	_, err := run(ctx, o, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func (o options) check() error {
	switch {
	case o.nodes < 1 || o.nodes > 10000:
		return fmt.Errorf("--nodes %d: must be 1 to 10000", o.nodes)
	case o.pods < 1:
		return fmt.Errorf("--pods %d: must be at least 1", o.pods)
	case o.pods > 110*o.nodes:
		return fmt.Errorf("--pods %d on %d nodes: more than 110 per node (the kubelet's maxPods)", o.pods, o.nodes)
	case o.qps <= 0 || o.burst < 1:
		return errors.New("--qps must be positive and --burst at least 1")
	case o.timeout <= 0:
		return errors.New("--timeout must be positive")
	}
	if err := o.RoundFlags.Check(); err != nil {
		return err
	}
	if err := o.LoadFlags.Check(); err != nil {
		return err
	}
	for _, t := range strings.Split(o.tools, ",") {
		if t != "kwok" && t != "fleet" && t != "fleet-shared" {
			return fmt.Errorf("--tools %q: a list of kwok, fleet and fleet-shared", o.tools)
		}
	}
	return nil
}

// run is the whole benchmark; it returns the results in the order run.
func run(ctx context.Context, o options, w io.Writer) ([]*result, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	logf := func(f string, a ...any) { fmt.Fprintf(w, time.Now().Format("15:04:05")+" "+f+"\n", a...) }
	if err := checkQuiet(o); err != nil {
		return nil, err
	}
	env, err := setup(ctx, o, logf)
	if err != nil {
		return nil, err
	}
	defer env.close()

	// A tool that fails (a timeout, an early exit) is named under the
	// table; the others still get their column. Round r starts with the
	// r-th tool, so none always runs first (on a fresh control plane) or
	// always right after another (in its load).
	tools := strings.Split(o.tools, ",")
	var results []*result
	var failed []string
	for round := range o.Rounds {
		order := roundOrder(tools, round)
		if o.Rounds > 1 {
			logf("round %d of %d: %s", round+1, o.Rounds, strings.Join(order, ", "))
		}
		for _, t := range order {
			load, busy := waitQuiet(ctx, o, logf)
			r, err := env.runTool(ctx, t, logf)
			if err != nil {
				if ctx.Err() != nil {
					return results, fmt.Errorf("%s: %w", t, err)
				}
				first, _, _ := strings.Cut(err.Error(), "\n")
				logf("%s FAILED: %v", t, err)
				if o.Rounds > 1 {
					first = fmt.Sprintf("round %d: %s", round+1, first)
				}
				failed = append(failed, t+": "+first)
				continue
			}
			r.round, r.loadBefore, r.busy = round, load, busy
			results = append(results, r)
		}
	}

	table := formatTable(o, env, results, failed)
	fmt.Fprintln(w)
	fmt.Fprint(w, table)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(table), 0o644); err != nil {
			return results, err
		}
		fmt.Fprintf(w, "\nwritten to %s\n", o.out)
		return results, failure(failed)
	}
	// The latest run as result.txt, and every run kept under its time.
	out := filepath.Join(env.dir, "result.txt")
	stamped := filepath.Join(env.dir, "result-"+time.Now().Format("20060102-150405")+".txt")
	for _, p := range []string{out, stamped} {
		if err := os.WriteFile(p, []byte(table), 0o644); err != nil {
			return results, err
		}
	}
	fmt.Fprintf(w, "\nwritten to %s (and %s)\n", out, stamped)
	return results, failure(failed)
}

// failure is the error of a run in which some tools failed.
func failure(failed []string) error {
	if len(failed) == 0 {
		return nil
	}
	return fmt.Errorf("%d of the tools failed: %s", len(failed), strings.Join(failed, "; "))
}
