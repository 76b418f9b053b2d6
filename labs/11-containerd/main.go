// Lab 11: talk to a real containerd the way the kubelet does: CRI v1 over a
// unix socket.
//
//	sudo scripts/containerd-up.sh
//	go run ./labs/11-containerd              # runtime, CRI version, conditions, pods, containers
//	go run ./labs/11-containerd --run-demo   # + a busybox pod: exec echo in it, read its log, remove it
//
// See README.md for what happens on each call.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"kubelet-labs/internal/labruntime"
	"kubelet-labs/mycore/cri"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

type config struct {
	endpoint string
	image    string
	logDir   string
	demo     bool
	keep     bool
	timeout  time.Duration
}

// run is the whole lab; main_test.go calls it too.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	env, err := labruntime.Load()
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	var cfg config
	fs := flag.NewFlagSet("11-containerd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.endpoint, "endpoint", env.Endpoint, "CRI endpoint (unix socket); default: $"+labruntime.EndpointEnvVar+", else "+orNone(env.File))
	fs.StringVar(&cfg.image, "image", env.BusyboxImage, "image for the demo container")
	fs.StringVar(&cfg.logDir, "pod-log-dir", env.PodLogDir, "where the demo pod's logs go (the kubelet's --pod-logs-dir, /var/log/pods by default)")
	fs.BoolVar(&cfg.demo, "run-demo", false, "run a busybox pod, exec echo in it, show its log, remove it")
	fs.BoolVar(&cfg.keep, "keep", false, "with --run-demo: leave the pod running (remove it with crictl rmp -f, or scripts/containerd-down.sh)")
	fs.DurationVar(&cfg.timeout, "timeout", 10*time.Second, "timeout of each CRI call")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}

	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	c, err := cri.Dial(ctx, cfg.endpoint, cri.WithTimeout(cfg.timeout))
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	defer c.Close()

	if err := show(ctx, c, stdout); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	if cfg.demo {
		if cfg.image == "" {
			fmt.Fprintf(stderr, "error: no image for the demo: pass --image, or run %s (it records BUSYBOX_IMAGE)\n", cri.UpHint)
			return 1
		}
		fmt.Fprintln(stdout)
		if err := demo(ctx, c, cfg, stdout); err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 1
		}
	}
	return 0
}

func orNone(s string) string {
	if s == "" {
		return "the state folder"
	}
	return s
}

// show prints what `crictl version`, `crictl info` and `crictl pods/ps` show.
func show(ctx context.Context, c *cri.Client, out io.Writer) error {
	info, err := c.Info(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "endpoint:    %s\n", c.Endpoint)
	fmt.Fprintf(out, "runtime:     %s %s\n", info.RuntimeName, info.RuntimeVersion)
	fmt.Fprintf(out, "CRI API:     %s\n", info.APIVersion)
	var conds []string
	for _, cond := range info.Conditions {
		s := fmt.Sprintf("%s=%t", cond.Type, cond.Status)
		if !cond.Status && cond.Reason != "" {
			s += fmt.Sprintf(" (%s: %s)", cond.Reason, cond.Message)
		}
		conds = append(conds, s)
	}
	fmt.Fprintf(out, "conditions:  %s\n", strings.Join(conds, " "))

	pods, err := c.Pods(ctx, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\npods (%d):\n", len(pods))
	if len(pods) > 0 {
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  POD ID\tNAMESPACE/NAME\tSTATE\tAGE")
		for _, p := range pods {
			fmt.Fprintf(tw, "  %.13s\t%s/%s\t%s\t%s\n", p.Id, p.Metadata.GetNamespace(), p.Metadata.GetName(),
				strings.TrimPrefix(p.State.String(), "SANDBOX_"), age(p.CreatedAt))
		}
		tw.Flush()
	}

	ctrs, err := c.Containers(ctx, "")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "containers (%d):\n", len(ctrs))
	if len(ctrs) > 0 {
		names := imageNames(ctx, c)
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  CONTAINER ID\tNAME\tIMAGE\tSTATE\tPOD ID")
		for _, ct := range ctrs {
			img := ct.Image.GetImage()
			if n, ok := names[img]; ok {
				img = n
			}
			fmt.Fprintf(tw, "  %.13s\t%s\t%s\t%s\t%.13s\n", ct.Id, ct.Metadata.GetName(), img,
				strings.TrimPrefix(ct.State.String(), "CONTAINER_"), ct.PodSandboxId)
		}
		tw.Flush()
	}
	return nil
}

// imageNames maps image IDs to a tag: containerd reports a container's
// image by ID (the kubelet's ImageRef); people read tags.
func imageNames(ctx context.Context, c *cri.Client) map[string]string {
	m := map[string]string{}
	imgs, err := c.ImageList(ctx)
	if err != nil {
		return m
	}
	for _, img := range imgs {
		if len(img.RepoTags) > 0 {
			m[img.Id] = img.RepoTags[0]
		}
	}
	return m
}

func age(createdAt int64) string {
	if createdAt == 0 {
		return "?"
	}
	return time.Since(time.Unix(0, createdAt)).Round(time.Second).String()
}

// ms prints a duration in milliseconds, the scale CRI calls live on.
func ms(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }
