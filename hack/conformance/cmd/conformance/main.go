// Command conformance runs upstream's node conformance e2e tests (v1.36.3)
// against lab 18, our kubelet (or lab 01's real kubelet), on the course's
// containerd: `make conformance`. See hack/conformance/internal/harness.
//
//	go run -C hack/conformance ./cmd/conformance                  # the whole selection, lab 18
//	go run -C hack/conformance ./cmd/conformance --focus 'Pods should get a host IP'
//	go run -C hack/conformance ./cmd/conformance --node 01 --procs 4
//	go run -C hack/conformance ./cmd/conformance --dry-run        # list the selected specs
//
// It prints "N passed, M failed, K skipped" and a line per failure with
// its cause, and keeps ginkgo's report, its output and the node's log in
// <state>/conformance/runs/<time>/ (and in $ARTIFACTS when set, as CI
// systems name their output folder). Exit status 1 when a spec failed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"kubelet-labs/hack/conformance/internal/harness"
)

// multi is a flag that may be given more than once.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, " ") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	var focus, skip multi
	o := harness.Options{}
	flag.Var(&focus, "focus", "a ginkgo regular expression of the specs to run, instead of the default selection (repeatable: any of them; $FOCUS)")
	flag.Var(&skip, "skip", "a regular expression of specs not to run, besides [Serial], [Disruptive], [Slow] and [Flaky] (repeatable; $SKIP)")
	flag.StringVar(&o.Node, "node", envOr("NODE", harness.NodeMyKubelet), "the node to test: 18 (lab 18, our kubelet) or 01 (lab 01, the real kubelet with the course's containerd as its CRI) ($NODE)")
	flag.IntVar(&o.Procs, "procs", 12, "ginkgo processes running specs in parallel ($PROCS)")
	flag.DurationVar(&o.Timeout, "timeout", 2*time.Hour, "give up on the specs after this long")
	flag.BoolVar(&o.DryRun, "dry-run", false, "only list the selected specs (no cluster, no node)")
	// `make conformance FOCUS=... SKIP=... NODE=... PROCS=...`: make
	// exports its command line's variables to the recipe, so they arrive
	// here without any quoting of the regular expressions
	if v := os.Getenv("FOCUS"); v != "" {
		focus = append(focus, v)
	}
	if v := os.Getenv("SKIP"); v != "" {
		skip = append(skip, v)
	}
	if v := os.Getenv("PROCS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "conformance: PROCS=%s: want a number of processes, at least 1\n", v)
			os.Exit(2)
		}
		o.Procs = n
	}
	flag.Parse()
	o.Focus, o.Skip = harness.DefaultFocus, harness.DefaultSkip
	if f := nonEmpty(focus); len(f) > 0 {
		o.Focus = f
	}
	o.Skip = append(o.Skip, nonEmpty(skip)...)
	o.Progress = os.Stdout

	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func nonEmpty(list []string) []string {
	var out []string
	for _, s := range list {
		if strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
	}
	return out
}

func run(o harness.Options) error {
	l, err := harness.NewLayout()
	if err != nil {
		return err
	}
	stamp := time.Now().Format("20060102-150405")
	o.RunDir = filepath.Join(l.Dir, "runs", stamp)
	// a name of its own: two runs on one containerd leave each other's
	// containers alone (the node removes only those with its name)
	o.NodeName = "conformance-" + stamp
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	s, err := l.Run(ctx, o)
	if err != nil {
		return err
	}
	if o.DryRun {
		fmt.Printf("%d specs selected (list: %s)\n", len(s.Specs), filepath.Join(o.RunDir, "e2e.log"))
		return nil
	}
	var b strings.Builder
	s.Print(&b)
	fmt.Fprintf(&b, "node: lab %s; %d ginkgo processes; wall time %s (build, images, cluster and run)\n", o.Node, o.Procs, time.Since(start).Round(time.Second))
	fmt.Print(b.String())
	if err := os.WriteFile(filepath.Join(o.RunDir, "summary.txt"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	fmt.Printf("report, e2e output and the node's log: %s\n", o.RunDir)
	if dir := os.Getenv("ARTIFACTS"); dir != "" {
		if err := copyRun(o.RunDir, filepath.Join(dir, "conformance")); err != nil {
			return err
		}
		fmt.Printf("copied to %s\n", filepath.Join(dir, "conformance"))
	}
	if s.Failed > 0 {
		os.Exit(1)
	}
	return nil
}

func copyRun(from, to string) error {
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
