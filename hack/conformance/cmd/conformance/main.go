// Command conformance runs upstream's conformance e2e tests (v1.36.3)
// against lab 18, our kubelet (or lab 01's real kubelet), on the course's
// containerd: `make conformance`. See hack/conformance/internal/harness.
// The certified and node suites run as root on a full cluster: two lab 18
// nodes, kube-proxy and CoreDNS (harness.ClusterSpec).
//
//	go run -C hack/conformance ./cmd/conformance                  # the default selection, lab 18
//	go run -C hack/conformance ./cmd/conformance --suite certified  # every [Conformance] spec
//	go run -C hack/conformance ./cmd/conformance --suite node       # every [NodeConformance] spec
//	go run -C hack/conformance ./cmd/conformance --focus 'Pods should get a host IP'
//	go run -C hack/conformance ./cmd/conformance --node 01 --procs 4
//	go run -C hack/conformance ./cmd/conformance --suite certified --dry-run  # count and list the specs
//
// The certified and node suites are two ginkgo runs, the parallel specs
// then the [Serial] and [Disruptive] ones in one process (harness.Phases),
// merged into one summary. It prints "N passed, M failed, K skipped", the
// tallies by SIG and by cause and a line per failure with its cause, and
// keeps ginkgo's reports, its output, the node's log, summary.txt and
// summary.md (a fragment for BASELINE.md) in <state>/conformance/runs/<time>/
// (and in $ARTIFACTS when set, as CI systems name their output folder).
// Exit status 1 when a spec failed.
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
	"kubelet-labs/hack/conformance/internal/report"
)

// multi is a flag that may be given more than once.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, " ") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	var focus, skip multi
	o := harness.Options{}
	flag.StringVar(&o.Suite, "suite", envOr("SUITE", harness.SuiteDefault), "the specs: default (the node's selection, no [Serial]), certified (every [Conformance] spec) or node (every [NodeConformance] spec); certified and node run the [Serial] and [Disruptive] ones after the others, one process ($SUITE)")
	flag.Var(&focus, "focus", "a ginkgo regular expression of the specs to run, instead of the suite's (repeatable: any of them; $FOCUS)")
	flag.Var(&skip, "skip", "a regular expression of specs not to run, besides the suite's ([Serial], [Disruptive], [Slow] and [Flaky] for default) (repeatable; $SKIP)")
	flag.StringVar(&o.Node, "node", envOr("NODE", harness.NodeMyKubelet), "the node to test: 18 (lab 18, our kubelet) or 01 (lab 01, the real kubelet with the course's containerd as its CRI) ($NODE)")
	flag.IntVar(&o.Procs, "procs", 12, "ginkgo processes running specs in parallel ($PROCS)")
	flag.DurationVar(&o.Timeout, "timeout", 0, "give up on the specs after this long (default 2h; 6h for certified and node, Sonobuoy's default)")
	flag.BoolVar(&o.Solved, "solved", false, "run lab 18 with its exercise solved: built from a copy of the checkout with solutions/18-mykubelet.patch applied ($SOLVED=1)")
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
	if v := os.Getenv("SOLVED"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			fmt.Fprintf(os.Stderr, "conformance: SOLVED=%s: want 1 (lab 18's exercise solved) or 0\n", v)
			os.Exit(2)
		}
		o.Solved = b
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
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "conformance: unexpected argument %q (flags only; see --help)\n", flag.Arg(0))
		os.Exit(2)
	}
	var err error
	o.Focus, o.Skip, err = harness.Selection(o.Suite)
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(2)
	}
	o.Skip = append([]string{}, o.Skip...)
	if o.Timeout < 0 {
		fmt.Fprintf(os.Stderr, "conformance: --timeout %s: want a duration above 0\n", o.Timeout)
		os.Exit(2)
	}
	if o.Timeout == 0 {
		// Sonobuoy gives a run 6 hours (sonobuoy pkg/config/config.go:
		// DefaultAggregationServerTimeoutSeconds = 21600)
		o.Timeout = 2 * time.Hour
		if o.Suite == harness.SuiteCertified || o.Suite == harness.SuiteNode {
			o.Timeout = 6 * time.Hour
		}
	}
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
		fmt.Printf("suite %s: ", o.Suite)
		s.PrintSelection(os.Stdout)
		list := filepath.Join(o.RunDir, "specs.txt")
		if err := os.WriteFile(list, []byte(specList(s)), 0o644); err != nil {
			return err
		}
		fmt.Printf("list: %s\n", list)
		return nil
	}
	node := "lab " + o.Node
	if o.Solved {
		node += ", its exercise solved (solutions/18-mykubelet.patch)"
	}
	var b strings.Builder
	s.Print(&b)
	fmt.Fprintf(&b, "suite %s; node: %s; %d ginkgo processes; wall time %s (build, images, cluster and run)\n", o.Suite, node, o.Procs, time.Since(start).Round(time.Second))
	fmt.Print(b.String())
	if err := os.WriteFile(filepath.Join(o.RunDir, "summary.txt"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	var md strings.Builder
	fmt.Fprintf(&md, "## Run %s: `make conformance SUITE=%s`, %s, %d processes\n\n", start.UTC().Format("2006-01-02 15:04 UTC"), o.Suite, node, o.Procs)
	s.Markdown(&md)
	if err := os.WriteFile(filepath.Join(o.RunDir, "summary.md"), []byte(md.String()), 0o644); err != nil {
		return err
	}
	fmt.Printf("report, e2e output, the node's log and summary.md (for BASELINE.md): %s\n", o.RunDir)
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

// specList is a dry run's selection, a name a line, under a line per part.
func specList(s report.Summary) string {
	var b strings.Builder
	parts := s.Parts
	if len(parts) == 0 {
		parts = []report.Part{{}}
	}
	for _, p := range parts {
		if p.Name != "" {
			fmt.Fprintf(&b, "# %s run (%d)\n", p.Name, p.Passed+p.Failed+p.Skipped)
		}
		for _, sp := range s.Specs {
			if sp.Part == p.Name {
				fmt.Fprintln(&b, sp.Name)
			}
		}
	}
	return b.String()
}

// copyRun copies the run's files and its parts' (the parallel/ and
// serial/ folders), not the cluster's and the node's state folders: they
// hold the control plane's keys.
func copyRun(from, to string) error {
	if err := copyFiles(from, to); err != nil {
		return err
	}
	for _, part := range []string{harness.PhaseParallel, harness.PhaseSerial} {
		if _, err := os.Stat(filepath.Join(from, part)); err == nil {
			if err := copyFiles(filepath.Join(from, part), filepath.Join(to, part)); err != nil {
				return err
			}
		}
	}
	return nil
}

// copyFiles copies the regular files of a folder.
func copyFiles(from, to string) error {
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
