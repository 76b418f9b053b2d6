// Lab 15 is how a container is stopped. The kubelet only asks: CRI
// StopContainer(id, timeout). The runtime sends the stop signal (SIGTERM),
// waits up to the timeout, then sends SIGKILL. A container that exits on
// SIGTERM ends with 143 at once; one that ignores it ends with 137 when
// the grace period is over.
//
// The lab creates pod default/stop-demo (pod.yaml) in the real apiserver,
// bound to node lab-node-15 that no kubelet serves, and plays that node's
// kubelet for it: it starts the pod on the mock CRI in this process (or on
// containerd) and stops its two containers twice with our killContainer
// (mycore/kuberuntime KillContainer):
//
//  1. with the pod's own grace period, spec.terminationGracePeriodSeconds;
//
//  2. after a delete with --grace-period=1: the deletion's grace period,
//     raised to the kubelet's 2 s minimum.
//
//     go run ./labs/00-cluster                                   # another terminal
//     go run ./labs/15-stop-escalation                           # on the mock CRI
//     sudo scripts/containerd-up.sh
//     go run ./labs/15-stop-escalation --runtime containerd      # on containerd
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labpod"
	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/kuberuntime"
)

//go:embed pod.yaml
var podYAML []byte

type options struct {
	kubeconfig  string
	runtime     string
	endpoint    string
	podLogsDir  string
	podFile     string
	nodeName    string
	deleteGrace int64
	image       string // tests: a containerd flavour's busybox image
}

func main() {
	// Our own flag set: the kubelet packages we import register cAdvisor's
	// flags on flag.CommandLine, and -h should list only this lab's.
	fs := flag.NewFlagSet("15-stop-escalation", flag.ExitOnError)
	var o options
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "admin kubeconfig (default: $KUBECONFIG, else the state folder's admin.kubeconfig)")
	fs.StringVar(&o.runtime, "runtime", labpod.Mock, "where the pod runs: mock (the mock CRI, in this process) or containerd (the course's, from the state folder's containerd/env)")
	fs.StringVar(&o.endpoint, "cri-endpoint", "", "with --runtime containerd: its CRI endpoint (default: from the state folder's containerd/env, or $CONTAINER_RUNTIME_ENDPOINT)")
	fs.StringVar(&o.podLogsDir, "pod-logs-dir", "", "where container logs go (default: the state folder's 15-stop-escalation/pod-logs on the mock, containerd's POD_LOG_DIR)")
	fs.StringVar(&o.podFile, "pod", "", "pod manifest to use instead of the lab's pod.yaml (copy it and edit: the repository may be read-only)")
	fs.StringVar(&o.nodeName, "node-name", "lab-node-15", "the node the pod is bound to (spec.nodeName); no kubelet serves it but this lab")
	fs.Int64Var(&o.deleteGrace, "delete-grace-period", 1, "grace period of the delete in part 2, as kubectl delete --grace-period=N (>= 1)")
	_ = fs.Parse(os.Args[1:]) // ExitOnError: a bad flag exits 2 with the usage

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := run(ctx, o, os.Stdout); err != nil {
		labenv.Fatal(err)
	}
}

// stopped is what one container's stop looked like.
type stopped struct {
	Name     string
	ExitCode int32
	Took     time.Duration // KillContainer, call to return
	Grace    int64         // the grace it got, seconds (without preStop time)
}

// report is what the lab saw, for its test.
type report struct {
	Runtime string
	Parts   [2][]stopped
}

func run(ctx context.Context, o options, w io.Writer) (*report, error) {
	out := labpod.NewTimeline(w)
	if o.deleteGrace < 1 {
		return nil, errors.New("--delete-grace-period must be at least 1 (0 is a forced delete: kubectl delete --force)")
	}
	if err := labenv.CheckNodeName(o.nodeName); err != nil {
		return nil, err
	}
	pod, err := labpod.Load(o.podFile, podYAML)
	if err != nil {
		return nil, err
	}

	// 1. The cluster, and the runtime the pod will run on.
	cfg, err := labenv.RESTConfig(ctx, o.kubeconfig)
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	rt, err := labpod.OpenRuntime(ctx, labpod.RuntimeOptions{Kind: o.runtime, Endpoint: o.endpoint, PodLogsDir: o.podLogsDir, Image: o.image, Lab: "15-stop-escalation"})
	if err != nil {
		return nil, err
	}
	defer rt.Close()
	out.Printf("cluster %s; runtime %s on %s", cfg.Host, rt.Version, rt.CRI.Endpoint)
	m := kuberuntime.New(rt.CRI, kuberuntime.Options{PodLogsDir: rt.PodLogsDir, Log: func(f string, a ...any) { out.Printf("kubelet  "+f, a...) }})
	rep := &report{Runtime: rt.Version}

	// 2. The pod object: bound to our node by spec.nodeName, so the
	// apiserver will give it a graceful deletion (an unbound pod is
	// deleted at once).
	pod.Spec.NodeName = o.nodeName
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Image == "busybox" {
			pod.Spec.Containers[i].Image = rt.Image
		}
	}
	if n, err := labpod.CleanRuntime(ctx, rt.CRI, pod.Namespace, pod.Name); err != nil {
		return nil, err
	} else if n > 0 {
		out.Printf("removed %d sandbox(es) of %s/%s left in the runtime by an earlier run", n, pod.Namespace, pod.Name)
	}
	pod, err = labpod.Create(ctx, client, pod, out.Printf)
	if err != nil {
		return nil, err
	}
	// At the end, also after an error or Ctrl-C: the pod's sandbox and
	// containers leave the runtime (lab 16 leaves that to the kubelet's
	// garbage collector), then the pod object goes for good — what the
	// kubelet's status manager does once nothing of the pod runs.
	defer labpod.Cleanup(client, rt.CRI, pod, out.Printf)
	out.Printf("pod %s/%s created (uid %s), bound to %s, spec.terminationGracePeriodSeconds=%s",
		pod.Namespace, pod.Name, pod.UID, pod.Spec.NodeName, seconds(pod.Spec.TerminationGracePeriodSeconds))

	// 3. Start it, as SyncPod does: a sandbox, then each container.
	if err := labpod.Start(ctx, m, rt.CRI, pod, out.Printf); err != nil {
		return nil, err
	}

	// Part 1: the pod's own grace period — the stop a failed liveness
	// probe or a changed container spec causes, no deletion involved.
	out.Printf("\n1. Stop each container with the pod's own grace period (kill reason: none; no deletion)")
	if rep.Parts[0], err = stopContainers(ctx, m, rt.CRI, pod, out); err != nil {
		return nil, err
	}
	out.Printf("   The kubelet sent no signal: it made one call per container, StopContainer(id, timeout). cri-client gave")
	out.Printf("   that call a deadline of its request timeout plus the timeout (%s + grace here; 2m + grace in a kubelet).", cri.DefaultTimeout)
	out.Printf("   The runtime sent SIGTERM, waited, and sent SIGKILL (%s).", sigkillLivesIn(rt.Kind))

	// Part 2: the pod is deleted with a shorter grace period. The kubelet
	// would first restart the containers (restartPolicy Always): SyncPod.
	out.Printf("\n2. SyncPod restarts them (restartPolicy %s); then the pod is deleted with --grace-period=%d", pod.Spec.RestartPolicy, o.deleteGrace)
	if err := labpod.Start(ctx, m, rt.CRI, pod, out.Printf); err != nil {
		return nil, err
	}
	out.Printf("DELETE pods/%s gracePeriodSeconds=%d   (what `kubectl delete pod %s --grace-period=%d` sends)", pod.Name, o.deleteGrace, pod.Name, o.deleteGrace)
	if err := client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &o.deleteGrace}); err != nil {
		return nil, err
	}
	deleted, err := client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	out.Printf("the apiserver set metadata.deletionGracePeriodSeconds=%s and deletionTimestamp=%s (now + the grace);",
		seconds(deleted.DeletionGracePeriodSeconds), deleted.DeletionTimestamp.UTC().Format(time.RFC3339))
	out.Printf("the object stays until the node's kubelet has stopped everything and deletes it for good")
	if rep.Parts[1], err = stopContainers(ctx, m, rt.CRI, deleted, out); err != nil {
		return nil, err
	}
	return rep, nil
}

// stopContainers stops every running container of pod at once, as KillPod
// does, each with our killContainer, and prints how each one ended.
func stopContainers(ctx context.Context, m *kuberuntime.Manager, c *cri.Client, pod *v1.Pod, out *labpod.Timeline) ([]stopped, error) {
	running, _, err := labpod.RunningPod(ctx, c, pod)
	if err != nil {
		return nil, err
	}
	// in the pod's order, for the table
	slices.SortFunc(running.Containers, func(a, b *kubecontainer.Container) int {
		return specIndex(pod, a.Name) - specIndex(pod, b.Name)
	})
	res := make([]stopped, len(running.Containers))
	var wg sync.WaitGroup
	out.Start()
	for i, ct := range running.Containers {
		wg.Go(func() {
			start := time.Now()
			r := m.KillContainer(ctx, pod, ct.ID, ct.Name, kuberuntime.ReasonUnknown, nil)
			res[i] = stopped{Name: ct.Name, Took: time.Since(start)}
			if r.Error != nil {
				out.Printf("KillContainer %s: %s", ct.Name, r.Message)
			}
		})
	}
	wg.Wait()
	out.Stop()

	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "   CONTAINER\tEXIT\tMEANS\tSTOP TOOK\tGRACE\tLAST LOG LINE\t")
	for i := range res {
		s := &res[i]
		st, err := c.ContainerStatus(ctx, running.Containers[i].ID.ID)
		if err != nil {
			return nil, err
		}
		g, _ := kuberuntime.GracePeriod(pod, kubecontainer.GetContainerSpec(pod, s.Name), kuberuntime.ReasonUnknown, nil)
		s.ExitCode, s.Grace = st.ExitCode, max(g, kuberuntime.MinimumGracePeriodSeconds)
		fmt.Fprintf(tw, "   %s\t%d\t%s\t%.3fs\t%ds\t%s\t\n", s.Name, s.ExitCode, endedBy(s.ExitCode), s.Took.Seconds(), s.Grace, lastLogLine(ctx, c, st.Id))
	}
	tw.Flush()
	for _, line := range strings.Split(strings.TrimSuffix(table.String(), "\n"), "\n") {
		out.Printf("%s", line)
	}
	return res, nil
}

func specIndex(pod *v1.Pod, name string) int {
	return slices.IndexFunc(pod.Spec.Containers, func(c v1.Container) bool { return c.Name == name })
}

// lastLogLine is what the container printed last: "got SIGTERM, bye" shows
// the signal arrived and the trap ran.
func lastLogLine(ctx context.Context, c *cri.Client, id string) string {
	lines, err := c.ContainerLog(ctx, id)
	if err != nil || len(lines) == 0 {
		return ""
	}
	return lines[len(lines)-1].Text
}

// endedBy reads an exit code the way a learner should: above 128 is
// 128 + the signal's number.
func endedBy(code int32) string {
	switch {
	case code == 143:
		return "128+15: SIGTERM"
	case code == 137:
		return "128+9: SIGKILL"
	case code > 128:
		return fmt.Sprintf("128+%d: signal %d", code-128, code-128)
	}
	return "its own exit code"
}

func sigkillLivesIn(kind string) string {
	if kind == labpod.Containerd {
		return "containerd: StopContainer in internal/cri/server/container_stop.go, pkg/cri/server/ in 1.6/1.7"
	}
	return "the mock: stopProcess in mylib/fakecri/process.go, the same steps as containerd's container_stop.go"
}

func seconds(p *int64) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprintf("%ds", *p)
}
