package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	DefaultSkip = []string{`\[Serial\]|\[Disruptive\]|\[Slow\]|\[Flaky\]`}
)

// Options say what to run.
type Options struct {
	// Focus and Skip are ginkgo regular expressions (a spec runs if it
	// matches any Focus and no Skip).
	Focus, Skip []string
	// Node is NodeMyKubelet or NodeRealKubelet; NodeName its name
	// (default DefaultNodeName).
	Node, NodeName string
	// Procs is ginkgo's parallel processes.
	Procs int
	// Images to make; nil: all.
	Images []string
	// RunDir receives report.json, junit.xml, e2e.log, the node's and the
	// scheduler's log and summary.txt.
	RunDir string
	// Timeout bounds the ginkgo run.
	Timeout time.Duration
	// DryRun lists the selected specs without a cluster.
	DryRun   bool
	Progress io.Writer
}

// Run builds what it needs, starts the cluster, runs the specs, stops
// everything, and returns the summary of ginkgo's report.
func (l *Layout) Run(ctx context.Context, o Options) (report.Summary, error) {
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if err := os.MkdirAll(o.RunDir, 0o755); err != nil {
		return report.Summary{}, err
	}
	e2e, err := l.Build("e2e.test", o.Progress)
	if err != nil {
		return report.Summary{}, err
	}
	ginkgo, err := l.Build("ginkgo", o.Progress)
	if err != nil {
		return report.Summary{}, err
	}
	if o.DryRun {
		return l.ginkgo(ctx, ginkgo, e2e, "", o)
	}
	rt, err := FindRuntime()
	if err != nil {
		return report.Summary{}, err
	}
	if err := l.Images(rt, o.Images, o.Progress); err != nil {
		return report.Summary{}, err
	}
	if o.NodeName == "" {
		o.NodeName = DefaultNodeName
	}
	c, err := l.StartCluster(ctx, rt, o.Node, o.NodeName, o.RunDir, o.Progress)
	if err != nil {
		return report.Summary{}, err
	}
	defer func() {
		fmt.Fprintf(o.Progress, "stopping the node, the scheduler and the control plane\n")
		c.Stop()
	}()
	return l.ginkgo(ctx, ginkgo, e2e, c.CP.AdminKubeconfig(), o)
}

// ginkgo runs the e2e binary under the ginkgo CLI; its whole output goes
// to e2e.log, a line a minute to Progress.
func (l *Layout) ginkgo(ctx context.Context, ginkgo, e2e, kubeconfig string, o Options) (report.Summary, error) {
	args := []string{"--no-color", "--timeout=" + o.Timeout.String(), "--output-dir=" + o.RunDir,
		"--json-report=report.json", "--junit-report=junit.xml", "--silence-skips"}
	if o.Procs > 1 && !o.DryRun {
		args = append(args, "--procs="+strconv.Itoa(o.Procs))
	}
	if o.DryRun {
		args = append(args, "--dry-run", "-v")
	}
	for _, f := range o.Focus {
		args = append(args, "--focus="+f)
	}
	for _, s := range o.Skip {
		args = append(args, "--skip="+s)
	}
	args = append(args, e2e, "--")
	if kubeconfig != "" {
		args = append(args, "--kubeconfig="+kubeconfig)
	}
	args = append(args, "--provider=skeleton", "--report-dir="+o.RunDir,
		// our control plane has no cluster add-ons to wait for
		"--minStartupPods=0", "--system-pods-startup-timeout=30s")
	logPath := filepath.Join(o.RunDir, "e2e.log")
	f, err := os.Create(logPath)
	if err != nil {
		return report.Summary{}, err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, ginkgo, args...)
	cmd.Dir = o.RunDir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// ginkgo stops its processes and writes the report on SIGINT
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = 2 * time.Minute
	start := time.Now()
	fmt.Fprintf(o.Progress, "ginkgo: %d process(es), output in %s\n", max(o.Procs, 1), logPath)
	if err := cmd.Start(); err != nil {
		return report.Summary{}, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
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
	s, err := report.Read(filepath.Join(o.RunDir, "report.json"))
	if err != nil {
		// no report: ginkgo itself failed (a bad regexp, a crashed suite)
		return s, fmt.Errorf("ginkgo: %v, and no report (%v): see %s", runErr, err, logPath)
	}
	if len(s.Specs) == 0 {
		return s, fmt.Errorf("no spec matched --focus %q (ginkgo matches \"Kubernetes e2e suite [sig-node] ...\"); list the selection with --dry-run", o.Focus)
	}
	return s, nil
}
