package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"kubelet-labs/hack/conformance/internal/report"
)

// The selection of issue 21: the node's own conformance specs, and the
// [Conformance] specs of the node features a kubelet implements.
var (
	DefaultFocus = []string{
		`\[sig-node\].*\[NodeConformance\]`,
		`(Pods|Probing container|Container Lifecycle Hook|Container Runtime|InitContainer|Kubelet|Variable Expansion|Security Context|Downward API|ConfigMap|Secrets).*\[Conformance\]`,
	}
	DefaultSkip = []string{`\[Serial\]|\[Disruptive\]|\[Slow\]|\[Flaky\]`, notNodeSpecs}
)

// notNodeSpecs keeps the default selection the 201 specs it was when the
// e2e binary held only sig-node's spec packages: over the whole suite,
// DefaultFocus's "Pods" also matches three control-plane specs (kubectl's
// server-side dry-run of Pods, the Endpoints and EndpointSlice controllers
// "for Pods matching a Service"), which the certified suite runs.
const notNodeSpecs = `\[sig-cli\] Kubectl client Kubectl server-side dry-run|\[sig-network\] (EndpointSlice|EndpointsController) should create Endpoints`

// The suites of `make conformance SUITE=...` (--suite).
const (
	// SuiteDefault is the issue-21 selection (DefaultFocus, DefaultSkip),
	// one parallel ginkgo run.
	SuiteDefault = "default"
	// SuiteCertified is every [Conformance] spec, what Sonobuoy's
	// certified-conformance mode runs: focus \[Conformance\] and no skip
	// (sonobuoy cmd/sonobuoy/app/modes.go: conformanceFocus, and
	// certified-conformance sets no skip, so its two [Disruptive]
	// NoExecuteTaintManager specs run too).
	SuiteCertified = "certified"
	// SuiteNode is every [NodeConformance] spec.
	SuiteNode = "node"
)

// Suites are the suites in the order --help lists them.
var Suites = []string{SuiteDefault, SuiteCertified, SuiteNode}

// SerialSpecs are the specs the two-part suites keep out of the parallel
// run and run after it in one process: [Serial] ones need the cluster to
// themselves, and every [Disruptive] one is [Serial] as well at v1.36.3
// (the two [Disruptive] [Conformance] specs, NoExecuteTaintManager's).
const SerialSpecs = `\[Serial\]|\[Disruptive\]`

// Selection is a suite's focus and skip before the user's --focus/--skip.
func Selection(suite string) (focus, skip []string, err error) {
	switch suite {
	case "", SuiteDefault:
		return DefaultFocus, DefaultSkip, nil
	case SuiteCertified:
		return []string{`\[Conformance\]`}, nil, nil
	case SuiteNode:
		return []string{`\[NodeConformance\]`}, nil, nil
	}
	return nil, nil, fmt.Errorf("unknown suite %q: want one of %s", suite, strings.Join(Suites, ", "))
}

// Options say what to run.
type Options struct {
	// Suite is SuiteDefault (or empty), SuiteCertified or SuiteNode: how
	// the specs of Focus and Skip are run (Phases).
	Suite string
	// Focus and Skip are ginkgo regular expressions (a spec runs if it
	// matches any Focus and no Skip); Selection gives a suite's.
	Focus, Skip []string
	// Node is NodeMyKubelet or NodeRealKubelet; NodeName its name
	// (default DefaultNodeName).
	Node, NodeName string
	// Procs is ginkgo's parallel processes.
	Procs int
	// Images to make; nil: all.
	Images []string
	// RunDir receives report.json, junit.xml, e2e.log, the node's and the
	// scheduler's log and summary.txt; a two-part suite's ginkgo runs
	// write theirs in RunDir/parallel and RunDir/serial.
	RunDir string
	// Timeout bounds the ginkgo runs, together.
	Timeout time.Duration
	// Full runs the specs on a full cluster (ClusterSpec.Full) whatever
	// the suite; the certified and node suites always do.
	Full bool
	// Solved runs lab 18 with its exercise solved: built from a copy of
	// the checkout with solutions/18-mykubelet.patch applied (the
	// learner's own files untouched). Lab 18 only.
	Solved bool
	// DryRun lists the selected specs without a cluster.
	DryRun   bool
	Progress io.Writer
}

// The two runs of the certified and node suites, and their folders in
// RunDir.
const (
	PhaseParallel = "parallel"
	PhaseSerial   = "serial"
)

// Phase is one ginkgo run of a suite.
type Phase struct {
	// Name is "" for a suite of one run, else "parallel" or "serial".
	Name        string
	Focus, Skip []string
	Procs       int
	// Dir is where the run writes its report and output.
	Dir string
}

// Phases splits the run into its ginkgo runs. The default suite is one
// run that skips [Serial] specs altogether (DefaultSkip). The certified and
// node suites are two: the specs that are neither [Serial] nor [Disruptive]
// with Procs processes, then the [Serial] and [Disruptive] ones with one
// process, each with its own report, merged. Sonobuoy's
// certified-conformance runs the same specs in a single process
// (E2E_PARALLEL false: its go-runner adds ginkgo's --p only for "true",
// kubernetes cluster/images/conformance/go-runner/cmd.go), which takes
// hours; with --p and no E2E_SKIP the go-runner skips [Serial] instead of
// running it. (The framework also marks [Serial] specs ginkgo.Serial,
// test/e2e/framework/ginkgowrapper.go:298-300, which ginkgo would hold to
// the end of a parallel run; a run of their own gives them a clean
// cluster and a report of their own.)
func Phases(o Options) ([]Phase, error) {
	if _, _, err := Selection(o.Suite); err != nil {
		return nil, err
	}
	if o.Suite == "" || o.Suite == SuiteDefault {
		return []Phase{{Focus: o.Focus, Skip: o.Skip, Procs: o.Procs, Dir: o.RunDir}}, nil
	}
	// ginkgo runs a spec that matches any --focus: the serial run's focus
	// is each focus and SerialSpecs, in either order in the spec's name
	serial := make([]string, len(o.Focus))
	for i, f := range o.Focus {
		serial[i] = fmt.Sprintf(`(?:%[1]s).*(?:%[2]s)|(?:%[2]s).*(?:%[1]s)`, f, SerialSpecs)
	}
	return []Phase{
		{Name: PhaseParallel, Focus: o.Focus, Skip: append(append([]string{}, o.Skip...), SerialSpecs), Procs: o.Procs, Dir: filepath.Join(o.RunDir, PhaseParallel)},
		{Name: PhaseSerial, Focus: serial, Skip: o.Skip, Procs: 1, Dir: filepath.Join(o.RunDir, PhaseSerial)},
	}, nil
}

// Run builds what it needs, starts the cluster, runs the specs (each
// phase in turn), stops everything, and returns the summary of ginkgo's
// reports, merged.
func (l *Layout) Run(ctx context.Context, o Options) (report.Summary, error) {
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	phases, err := Phases(o)
	if err != nil {
		return report.Summary{}, err
	}
	if o.full() && !o.DryRun {
		// before any build: as root it runs what it builds
		if err := l.RootOnly(); err != nil {
			return report.Summary{}, err
		}
	}
	if err := os.MkdirAll(o.RunDir, 0o755); err != nil {
		return report.Summary{}, err
	}
	e2e, err := l.Build(E2EBinary(o.Suite), o.Progress)
	if err != nil {
		return report.Summary{}, err
	}
	ginkgo, err := l.Build("ginkgo", o.Progress)
	if err != nil {
		return report.Summary{}, err
	}
	if o.DryRun {
		return l.phases(ctx, ginkgo, e2e, "", o, phases)
	}
	c, err := l.StartFor(ctx, o)
	if err != nil {
		return report.Summary{}, err
	}
	defer func() {
		fmt.Fprintf(o.Progress, "stopping the nodes, the scheduler and the control plane\n")
		if err := c.Stop(); err != nil {
			fmt.Fprintf(o.Progress, "stopping the cluster: %v\n", err)
		}
	}()
	return l.phases(ctx, ginkgo, e2e, c.CP.AdminKubeconfig(), o, phases)
}

// phases runs each phase and merges the reports; the phases share
// o.Timeout. A phase that selects nothing (a --focus without [Serial]
// specs) is no error as long as the run as a whole selected some.
func (l *Layout) phases(ctx context.Context, ginkgo, e2e, kubeconfig string, o Options, phases []Phase) (report.Summary, error) {
	if len(phases) == 1 {
		s, err := l.ginkgo(ctx, ginkgo, e2e, kubeconfig, o, phases[0], o.Timeout)
		if err == nil && len(s.Specs) == 0 {
			err = noSpecs(o)
		}
		return s, err
	}
	deadline := time.Now().Add(o.Timeout)
	var all report.Summary
	for _, p := range phases {
		left := time.Until(deadline)
		if left <= 0 {
			return all, fmt.Errorf("no time left for the %s run (--timeout %s)", p.Name, o.Timeout)
		}
		s, err := l.ginkgo(ctx, ginkgo, e2e, kubeconfig, o, p, left)
		if err != nil {
			return all, fmt.Errorf("%s run: %w", p.Name, err)
		}
		all.Add(p.Name, p.Procs, s)
	}
	if all.Total() == 0 {
		return all, noSpecs(o)
	}
	return all, nil
}

func noSpecs(o Options) error {
	return fmt.Errorf("no spec matched --focus %q (ginkgo matches \"Kubernetes e2e suite [sig-node] ...\"); list the selection with --dry-run", o.Focus)
}

// ginkgo runs the e2e binary under the ginkgo CLI; its whole output goes
// to e2e.log, a line a minute to Progress.
func (l *Layout) ginkgo(ctx context.Context, ginkgo, e2e, kubeconfig string, o Options, p Phase, timeout time.Duration) (report.Summary, error) {
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return report.Summary{}, err
	}
	args := []string{"--no-color", "--timeout=" + timeout.Round(time.Second).String(), "--output-dir=" + p.Dir,
		"--json-report=report.json", "--junit-report=junit.xml", "--silence-skips"}
	if p.Procs > 1 && !o.DryRun {
		args = append(args, "--procs="+strconv.Itoa(p.Procs))
	}
	if o.DryRun {
		args = append(args, "--dry-run", "-v")
	}
	for _, f := range p.Focus {
		args = append(args, "--focus="+f)
	}
	for _, s := range p.Skip {
		args = append(args, "--skip="+s)
	}
	args = append(args, e2e, "--")
	if kubeconfig != "" {
		args = append(args, "--kubeconfig="+kubeconfig)
	}
	args = append(args, "--provider=skeleton", "--report-dir="+p.Dir,
		// the kubectl specs (sig-cli) run the kubectl built with the
		// control plane, at its version (internal/controlplane)
		"--kubectl-path="+filepath.Join(l.ControlPlaneBinDir, "kubectl"),
		// our control plane has no cluster add-ons to wait for
		"--minStartupPods=0", "--system-pods-startup-timeout=30s")
	logPath := filepath.Join(p.Dir, "e2e.log")
	f, err := os.Create(logPath)
	if err != nil {
		return report.Summary{}, err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, ginkgo, args...)
	cmd.Dir = p.Dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// ginkgo stops its processes and writes the report on SIGINT
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = 2 * time.Minute
	start := time.Now()
	name := "ginkgo"
	if p.Name != "" {
		name = "ginkgo, " + p.Name + " run"
	}
	procs := max(p.Procs, 1)
	if o.DryRun {
		procs = 1 // a dry run only lists
	}
	fmt.Fprintf(o.Progress, "%s: %d process(es), output in %s\n", name, procs, logPath)
	if err := cmd.Start(); err != nil {
		return report.Summary{}, err
	}
	done := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		// ginkgo's spec processes are in its process group: when ginkgo
		// is killed (it did not stop them within WaitDelay), they would
		// outlive the run
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		done <- err
	}()
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	var runErr error
wait:
	for {
		select {
		case runErr = <-done:
			break wait
		case <-tick.C:
			fmt.Fprintf(o.Progress, "  ... %s\n", time.Since(start).Round(time.Second))
		}
	}
	s, err := report.Read(filepath.Join(p.Dir, "report.json"))
	if err != nil {
		// no report: ginkgo itself failed (a bad regexp, a crashed suite)
		return s, fmt.Errorf("ginkgo: %v, and no report (%v): see %s", runErr, err, logPath)
	}
	return s, nil
}
