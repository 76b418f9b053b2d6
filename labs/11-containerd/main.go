// Lab 11: talk to a real containerd the way the kubelet does: CRI v1 over a
// unix socket.
//
//	sudo scripts/containerd-up.sh            # once: the course's only command as root
//	go run ./labs/11-containerd              # runtime, CRI version, conditions, pods, containers
//	go run ./labs/11-containerd --run-demo   # + a busybox pod: exec echo in it, read its log, remove it
//
// This lab dials the socket itself (mycore/cri.Dial, the kubelet's own
// client), where the later labs open their runtime with internal/labruntime:
// connecting is what it is about. See README.md for what happens on each call.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/labs/11-containerd/crictlview"
	"kubelet-labs/mycore/cri"
)

type options struct {
	endpoint   string
	image      string
	podLogsDir string
	demo       bool
	keep       bool
	timeout    time.Duration
}

func main() {
	var o options
	labenv.Main(labenv.Lab{
		Name:  "11-containerd",
		Flags: func(fs *flag.FlagSet) { flags(fs, &o) },
		Check: func() error { return check(o) },
		Run:   func(ctx context.Context, out *labenv.Printer) error { return run(ctx, o, out) },
	})
}

// flags are the lab's flags; --cri-endpoint and --pod-logs-dir are named
// as in every later lab.
func flags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.endpoint, "cri-endpoint", "", "the runtime's CRI endpoint, e.g. unix:///…/containerd.sock (default: $"+labruntime.EndpointEnvVar+", else /var/lib/kubelet-labs/containerd/env, written by "+labruntime.UpHint+")")
	fs.StringVar(&o.image, "image", "", "image of the demo container (default: BUSYBOX_IMAGE of that env file, else "+labruntime.BusyboxImage+")")
	fs.StringVar(&o.podLogsDir, "pod-logs-dir", "", "where the demo pod's logs go, the kubelet's /var/log/pods (default: POD_LOG_DIR of that env file)")
	fs.BoolVar(&o.demo, "run-demo", false, "run a busybox pod, exec echo in it, show its log, remove it")
	fs.BoolVar(&o.keep, "keep", false, "with --run-demo: leave the pod running (the output says how to remove it)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "timeout of each CRI call")
}

func check(o options) error {
	if o.timeout <= 0 {
		return fmt.Errorf("--timeout must be positive")
	}
	return nil
}

// run is the whole lab; main_test.go calls it too.
func run(ctx context.Context, o options, out *labenv.Printer) error {
	// Where the course's containerd listens, and what it has: the env file
	// scripts/containerd-up.sh wrote. The flags win over it.
	env, err := labruntime.Load()
	if err != nil {
		return err
	}
	if o.endpoint == "" {
		o.endpoint = env.Endpoint
	}
	if o.podLogsDir == "" {
		o.podLogsDir = env.PodLogDir
	}
	if o.image == "" {
		o.image = env.BusyboxImage
	}
	if o.image == "" {
		o.image = labruntime.BusyboxImage
	}

	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// What the kubelet does at start-up (PreInitRuntimeService): dial, then
	// Version and ImageFsInfo once. No answer, no kubelet; our Dial turns
	// each way this fails into a sentence.
	c, err := cri.Dial(ctx, o.endpoint, cri.WithTimeout(o.timeout), cri.WithStartHint(labruntime.UpHint))
	if err != nil {
		return err
	}
	defer c.Close()

	// What `crictl version`, `crictl info`, `crictl pods` and `crictl ps -a` show.
	if err := crictlview.Print(ctx, c, out); err != nil {
		return err
	}
	if !o.demo {
		return nil
	}
	out.Printf("")
	return demo(ctx, c, o, out)
}

// script is the demo container's command: say hello, then wait for SIGTERM.
// It traps TERM because in its own PID namespace sh is PID 1, and PID 1
// ignores signals it has no handler for: without the trap StopContainer
// would wait the whole grace period and then SIGKILL it (lab 15).
// sh runs a trap only once the foreground command (sleep 1) returns, so a
// stop takes up to a second. Plain sh, no pipes or $(...): the mock CRI's
// little shell runs it too.
const script = `trap 'echo "got SIGTERM, bye"; exit 0' TERM
echo "hello from lab11-demo"
while true; do sleep 1; done`

// demo makes the CRI calls the kubelet makes for a one-container pod, in
// its order, and prints each with its duration.
func demo(ctx context.Context, c *cri.Client, o options, out *labenv.Printer) error {
	if ok, err := c.HasImage(ctx, o.image); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("the runtime has no image %s: run %s, which imports it, or pass --image", o.image, labruntime.UpHint)
	}
	uid := make([]byte, 8)
	_, _ = rand.Read(uid)
	p := cri.Pod{Name: "lab11-demo", Namespace: "labs", UID: hex.EncodeToString(uid), LogDir: o.podLogsDir}
	out.Printf("demo: pod %s/%s (image %s)", p.Namespace, p.Name, o.image)

	// RunPodSandbox: the network namespace, CNI ADD (the pod IP), the pause container.
	t0 := time.Now()
	podID, podCfg, err := c.RunPod(ctx, p)
	if err != nil {
		return err
	}
	took := time.Since(t0)
	ip := "none"
	if st, err := c.PodStatus(ctx, podID); err == nil && st.GetNetwork().GetIp() != "" {
		ip = st.GetNetwork().GetIp()
	}
	out.Printf("  RunPodSandbox          %7s  sandbox %.13s, pod IP %s", ms(took), podID, ip)

	removed := false
	defer func() {
		if !removed && !o.keep {
			// ctx may be cancelled (Ctrl-C): clean up with a fresh one
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = c.RemovePod(cctx, podID, 5*time.Second)
		}
	}()

	// CreateContainer + StartContainer: the image's snapshot, an OCI spec
	// that joins the sandbox's namespaces, runc start; the log file opened.
	t0 = time.Now()
	ctrID, err := c.StartContainer(ctx, podID, podCfg, p.ContainerConfig(cri.Container{
		Name: "hello", Image: o.image, Command: []string{"sh", "-c", script},
	}))
	if err != nil {
		return err
	}
	out.Printf("  Create+StartContainer  %7s  container %.13s", ms(time.Since(t0)), ctrID)
	if _, err := c.WaitContainerState(ctx, ctrID, runtimeapi.ContainerState_CONTAINER_RUNNING, 50*time.Millisecond); err != nil {
		return err
	}

	// ExecSync: what an exec probe is.
	cmd := []string{"echo", "hello from ExecSync"}
	t0 = time.Now()
	res, err := c.Exec(ctx, ctrID, cmd, 10*time.Second)
	if err != nil {
		return err
	}
	out.Printf("  ExecSync               %7s  %q -> stdout %q, exit code %d", ms(time.Since(t0)), cmd, res.Stdout, res.ExitCode)

	if o.keep {
		crictl := labruntime.CrictlPath() + " --runtime-endpoint " + c.Endpoint
		out.Printf("")
		out.Printf("left running (--keep). Look at it, then remove it:")
		out.Printf("  %s pods --name %s", crictl, p.Name)
		out.Printf("  %s rmp -f %.13s", crictl, podID)
		out.Printf("  (or stop everything: sudo scripts/containerd-down.sh)")
		return nil
	}

	// StopContainer: SIGTERM, then SIGKILL after the timeout (lab 15).
	t0 = time.Now()
	if err := c.StopContainer(ctx, ctrID, 5*time.Second); err != nil {
		return err
	}
	st, err := c.WaitContainerState(ctx, ctrID, runtimeapi.ContainerState_CONTAINER_EXITED, 50*time.Millisecond)
	if err != nil {
		return err
	}
	out.Printf("  StopContainer          %7s  exit code %d (%s)", ms(time.Since(t0)), st.ExitCode, st.Reason)

	// The log: containerd wrote it, in the CRI format; the kubelet only reads it.
	if lines, err := c.ContainerLog(ctx, ctrID); err != nil {
		out.Printf("  log: %v", err)
	} else {
		out.Printf("  log %s:", st.LogPath)
		for _, l := range lines {
			out.Printf("    %s %s  %s", l.Time.Format("15:04:05.000"), l.Stream, l.Text)
		}
	}

	// StopPodSandbox + RemovePodSandbox: CNI DEL, the pause container and
	// the network namespace gone.
	t0 = time.Now()
	if err := c.RemovePod(ctx, podID, 5*time.Second); err != nil {
		return err
	}
	removed = true
	out.Printf("  Stop+RemovePodSandbox  %7s  pod gone", ms(time.Since(t0)))
	return nil
}

// ms prints a duration in milliseconds, the scale CRI calls live on.
func ms(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }
