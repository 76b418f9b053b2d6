package main

import (
	"context"
	"fmt"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/internal/labruntime"
	"kubelet-labs/mycore/cri"
)

// Lab 11 talks to containerd; its demo removes its pod when it ends, so
// the check looks at what runs: containerd itself, its images, and the
// demo pod the README leaves running with --keep (the pod, its container,
// the log file containerd writes for it).
func init() {
	register("11", labCheck{Title: "containerd over CRI v1", Check: checkLab11})
}

// lab11DemoPod is the demo's pod name (labs/11-containerd/main.go).
const lab11DemoPod = "lab11-demo"

func checkLab11(ctx context.Context, e *Env) []Result {
	env, err := labruntime.Load()
	if err != nil {
		return []Result{NotYet("containerd's env file: "+err.Error(), "start containerd: sudo scripts/containerd-up.sh (lab 11, Run it)")}
	}
	c, err := e.CRI(ctx, "")
	if err != nil {
		return []Result{NotYet("containerd does not answer: "+err.Error(), "start containerd: sudo scripts/containerd-up.sh (lab 11, Run it)")}
	}
	defer c.Close()
	return []Result{
		runtimeAnswers(ctx, c),
		imagesImported(ctx, c, env),
		demoKept(ctx, c),
		demoLog(ctx, c, env),
	}
}

// runtimeAnswers: Version and Status, as the kubelet calls them at start-up.
func runtimeAnswers(ctx context.Context, c *cri.Client) Result {
	info, err := c.Info(ctx)
	if err != nil {
		return NotYet("containerd does not answer CRI v1: "+err.Error(), "restart it: sudo scripts/containerd-up.sh")
	}
	ready := info.Ready(runtimeapi.RuntimeReady) && info.Ready(runtimeapi.NetworkReady)
	if !ready {
		return NotYet(fmt.Sprintf("%s %s answers on %s, but RuntimeReady and NetworkReady are not both true", info.RuntimeName, info.RuntimeVersion, c.Endpoint),
			"see containerd's log in its folder under /var/lib/kubelet-labs/containerd/; restart it: sudo scripts/containerd-up.sh")
	}
	return Done("%s %s answers CRI %s on %s: RuntimeReady, NetworkReady", info.RuntimeName, info.RuntimeVersion, info.APIVersion, c.Endpoint)
}

// imagesImported: the two offline images containerd-up.sh imports.
func imagesImported(ctx context.Context, c *cri.Client, env labruntime.Env) Result {
	var missing []string
	for _, img := range []string{env.PauseImage, env.BusyboxImage} {
		if img == "" {
			continue
		}
		if ok, err := c.HasImage(ctx, img); err != nil || !ok {
			missing = append(missing, img)
		}
	}
	if env.PauseImage == "" || env.BusyboxImage == "" || len(missing) > 0 {
		return NotYet("the offline images are not all there: missing "+strings.Join(missing, ", "), "sudo scripts/containerd-up.sh imports them")
	}
	return Done("images %s and %s are in containerd", env.PauseImage, env.BusyboxImage)
}

// demoKept: the pod --run-demo --keep leaves: its sandbox ready with an IP
// from CNI, its container running.
func demoKept(ctx context.Context, c *cri.Client) Result {
	hint := "run the demo and keep its pod: go run ./labs/11-containerd --run-demo --keep (Check your run)"
	sb, err := readyDemoSandbox(ctx, c)
	if err != nil || sb == nil {
		return NotYet("no "+lab11DemoPod+" pod runs in containerd", hint)
	}
	ip := "no IP"
	if st, err := c.PodStatus(ctx, sb.Id); err == nil && st.GetNetwork().GetIp() != "" {
		ip = "pod IP " + st.GetNetwork().GetIp()
	}
	ctrs, err := c.Containers(ctx, sb.Id)
	if err != nil {
		return NotYet("cannot list the demo pod's containers: "+err.Error(), hint)
	}
	for _, ct := range ctrs {
		if ct.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			return Done("pod %s/%s runs: sandbox %s ready (%s), container %s running", sb.Metadata.Namespace, sb.Metadata.Name, cri.ShortID(sb.Id), ip, ct.Metadata.Name)
		}
	}
	return NotYet(fmt.Sprintf("the %s sandbox %s (%s) has no running container", lab11DemoPod, cri.ShortID(sb.Id), ip), hint)
}

// demoLog: the log file containerd writes for the kept pod's container,
// in the folder the caller (our lab, as the kubelet) chose.
func demoLog(ctx context.Context, c *cri.Client, env labruntime.Env) Result {
	hint := "with the demo pod kept (go run ./labs/11-containerd --run-demo --keep), its log is under " + env.PodLogDir
	sb, err := readyDemoSandbox(ctx, c)
	if err != nil || sb == nil {
		return NotYet("no log of a running "+lab11DemoPod+" container", hint)
	}
	ctrs, err := c.Containers(ctx, sb.Id)
	if err != nil || len(ctrs) == 0 {
		return NotYet("no log of a running "+lab11DemoPod+" container", hint)
	}
	st, err := c.ContainerStatus(ctx, ctrs[0].Id)
	if err != nil {
		return NotYet("ContainerStatus: "+err.Error(), hint)
	}
	lines, err := c.ContainerLog(ctx, ctrs[0].Id)
	if err != nil {
		return NotYet("the demo's log: "+err.Error(), hint)
	}
	for _, l := range lines {
		if strings.Contains(l.Text, "hello from "+lab11DemoPod) {
			return Done("containerd wrote %s (CRI format: %s %s %q)", st.LogPath, l.Time.Format("15:04:05.000"), l.Stream, l.Text)
		}
	}
	return NotYet(fmt.Sprintf("%s has no line \"hello from %s\" (yet)", st.LogPath, lab11DemoPod), hint)
}

// readyDemoSandbox is the newest ready sandbox of the demo pod, or nil.
func readyDemoSandbox(ctx context.Context, c *cri.Client) (*runtimeapi.PodSandbox, error) {
	pods, err := c.Pods(ctx, map[string]string{cri.LabelPodName: lab11DemoPod})
	if err != nil {
		return nil, err
	}
	var newest *runtimeapi.PodSandbox
	for _, p := range pods {
		if p.State == runtimeapi.PodSandboxState_SANDBOX_READY && (newest == nil || p.CreatedAt > newest.CreatedAt) {
			newest = p
		}
	}
	return newest, nil
}
