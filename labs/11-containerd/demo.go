package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/mycore/cri"
)

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
func demo(ctx context.Context, c *cri.Client, cfg config, out io.Writer) error {
	uid := make([]byte, 8)
	_, _ = rand.Read(uid)
	p := cri.Pod{Name: "lab11-demo", Namespace: "labs", UID: hex.EncodeToString(uid), LogDir: cfg.logDir}
	fmt.Fprintf(out, "demo: pod %s/%s (image %s)\n", p.Namespace, p.Name, cfg.image)

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
	fmt.Fprintf(out, "  RunPodSandbox          %7s  sandbox %.13s, pod IP %s\n", ms(took), podID, ip)

	removed := false
	defer func() {
		if !removed && !cfg.keep {
			// ctx may be cancelled (Ctrl-C): clean up with a fresh one
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = c.RemovePod(cctx, podID, 5*time.Second)
		}
	}()

	t0 = time.Now()
	ctrID, err := c.StartContainer(ctx, podID, podCfg, p.ContainerConfig(cri.Container{
		Name: "hello", Image: cfg.image, Command: []string{"sh", "-c", script},
	}))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  Create+StartContainer  %7s  container %.13s\n", ms(time.Since(t0)), ctrID)
	if _, err := c.WaitContainerState(ctx, ctrID, runtimeapi.ContainerState_CONTAINER_RUNNING, 50*time.Millisecond); err != nil {
		return err
	}

	cmd := []string{"echo", "hello from ExecSync"}
	t0 = time.Now()
	res, err := c.Exec(ctx, ctrID, cmd, 10*time.Second)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  ExecSync               %7s  %q -> stdout %q, exit code %d\n", ms(time.Since(t0)), cmd, res.Stdout, res.ExitCode)

	if cfg.keep {
		sock := cri.SocketPath(c.Endpoint)
		fmt.Fprintf(out, "\nleft running (--keep). Look at it, then remove it:\n"+
			"  crictl --runtime-endpoint %s pods\n  crictl --runtime-endpoint %s rmp -f %.13s\n", c.Endpoint, c.Endpoint, podID)
		if sock != "" {
			fmt.Fprintf(out, "  (or stop everything: sudo scripts/containerd-down.sh)\n")
		}
		return nil
	}

	t0 = time.Now()
	if err := c.StopContainer(ctx, ctrID, 5*time.Second); err != nil {
		return err
	}
	st, err := c.WaitContainerState(ctx, ctrID, runtimeapi.ContainerState_CONTAINER_EXITED, 50*time.Millisecond)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  StopContainer          %7s  exit code %d (%s)\n", ms(time.Since(t0)), st.ExitCode, st.Reason)

	if lines, err := c.ContainerLog(ctx, ctrID); err != nil {
		fmt.Fprintf(out, "  log: %v\n", err)
	} else {
		fmt.Fprintf(out, "  log %s:\n", st.LogPath)
		for _, l := range lines {
			fmt.Fprintf(out, "    %s %s  %s\n", l.Time.Format("15:04:05.000"), l.Stream, l.Text)
		}
	}

	t0 = time.Now()
	if err := c.RemovePod(ctx, podID, 5*time.Second); err != nil {
		return err
	}
	removed = true
	fmt.Fprintf(out, "  Stop+RemovePodSandbox  %7s  pod gone\n", ms(time.Since(t0)))
	return nil
}
