// Lab 15 is how a container is stopped. The kubelet only asks: CRI
// StopContainer(id, timeout). The runtime sends the stop signal (SIGTERM),
// waits up to the timeout, then sends SIGKILL. A container that exits on
// SIGTERM ends with 143 at once; one that ignores it ends with 137 when
// the grace period is over.
//
//	go run ./labs/00-cluster                                   # another terminal
//	go run ./labs/15-stop-escalation                           # on the mock CRI
//	sudo scripts/containerd-up.sh                              # once: the course's only root command
//	go run ./labs/15-stop-escalation --runtime containerd      # on containerd
//
// The lab creates pod default/stop-demo (pod.yaml) in the real apiserver,
// bound to node lab-node-15 that no kubelet serves, and plays that node's
// kubelet for it: it starts the pod on the mock CRI in this process (or on
// containerd) and stops its two containers twice with our killContainer
// (mycore/kuberuntime KillContainer): first with the pod's own grace
// period, spec.terminationGracePeriodSeconds; then after a delete with
// --grace-period=1, with the deletion's grace period, raised to the
// kubelet's 2 s minimum.
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labpod"
	"kubelet-labs/internal/labrecord"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/state"
	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/kuberuntime"
)

//go:embed pod.yaml
var podYAML []byte

type options struct {
	labpod.Options
	deleteGrace int64
}

func main() {
	var o options
	labenv.Main(labenv.Lab{
		Name: "15-stop-escalation",
		Flags: func(fs *flag.FlagSet) {
			o.Register(fs, "lab-node-15")
			fs.Int64Var(&o.deleteGrace, "delete-grace-period", 1, "grace period of the delete in part 2, as kubectl delete --grace-period=N (>= 1)")
		},
		Check: o.check,
		Run: func(ctx context.Context, out *labenv.Printer) error {
			_, err := run(ctx, o, out)
			return err
		},
	})
}

func (o *options) check() error {
	if o.deleteGrace < 1 {
		return errors.New("--delete-grace-period must be at least 1 (0 is a forced delete: kubectl delete --force)")
	}
	return nil
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

func run(ctx context.Context, o options, w *labenv.Printer) (*report, error) {
	// The cluster, the runtime, and pod stop-demo: created in the
	// apiserver, bound to our node, started in the runtime by our SyncPod.
	s, err := labpod.Begin(ctx, o.Options, "15-stop-escalation", podYAML, w)
	if err != nil {
		return nil, err
	}
	// At the end, also after an error or Ctrl-C: the pod's sandbox and
	// containers leave the runtime (lab 16 leaves that to the kubelet's
	// garbage collector), then the pod object goes for good — what the
	// kubelet's status manager does once nothing of the pod runs.
	defer s.End(true)
	m, c, pod, out := s.M, s.RT.CRI, s.Pod, s.Out
	rep := &report{Runtime: s.RT.Name}

	// Part 1: the pod's own grace period — the stop a failed liveness
	// probe or a changed container spec causes, no deletion involved.
	out.Printf("\n1. Stop each container with the pod's own grace period (kill reason: none; no deletion)")
	if rep.Parts[0], err = stopContainers(ctx, m, c, pod, out); err != nil {
		return nil, err
	}
	out.Printf("   The kubelet sent no signal: it made one call per container, StopContainer(id, timeout). cri-client gave")
	out.Printf("   that call a deadline of its request timeout plus the timeout (%s + grace here; 2m + grace in a kubelet).", cri.DefaultTimeout)
	out.Printf("   The runtime sent SIGTERM, waited, and sent SIGKILL (%s).", sigkillLivesIn(s.RT.Kind))

	// Part 2: the pod is deleted with a shorter grace period. The kubelet
	// would first restart the containers (restartPolicy Always): SyncPod.
	out.Printf("\n2. SyncPod restarts them (restartPolicy %s); then the pod is deleted with --grace-period=%d", pod.Spec.RestartPolicy, o.deleteGrace)
	if err := labpod.Start(ctx, m, c, pod, out.Printf); err != nil {
		return nil, err
	}
	out.Printf("DELETE pods/%s gracePeriodSeconds=%d   (what `kubectl delete pod %s --grace-period=%d` sends)", pod.Name, o.deleteGrace, pod.Name, o.deleteGrace)
	if err := s.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &o.deleteGrace}); err != nil {
		return nil, err
	}
	deleted, err := s.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	out.Printf("the apiserver set metadata.deletionGracePeriodSeconds=%s and deletionTimestamp=%s (now + the grace);",
		seconds(deleted.DeletionGracePeriodSeconds), deleted.DeletionTimestamp.UTC().Format(time.RFC3339))
	out.Printf("the object stays until the node's kubelet has stopped everything and deletes it for good")
	if rep.Parts[1], err = stopContainers(ctx, m, c, deleted, out); err != nil {
		return nil, err
	}
	out.Printf("\n3. Nothing runs any more: the sandbox and the containers leave the runtime (lab 16: the kubelet's garbage\n   collector does that), and the pod object is deleted for good (the kubelet's status manager does that)")
	if err := writeRecord(s.RT.Kind, rep); err != nil {
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
	if kind != labruntime.Mock {
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

// The lab removes everything it made — the pod object, its sandbox and
// containers — so nothing of a run is left for `make check LAB=15` to look
// at. What the run saw is kept instead in a small text file in the lab's
// state folder, one per kind of runtime: RecordFile(kind).

// RecordFile is the record of the last run on a runtime kind: "mock" or
// "containerd" (any flavour), under the state folder's 15-stop-escalation/.
func RecordFile(kind string) string { return "last-run-" + kind + ".txt" }

// recordKind is the record a runtime's run goes to.
func recordKind(kind string) string {
	if kind == labruntime.Mock {
		return labruntime.Mock
	}
	return labruntime.Containerd
}

// writeRecord writes one line per container stop:
//
//	part 1 polite exit 143 grace 3s took 1.153s
func writeRecord(kind string, rep *report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# lab 15 on %s, %s: how each stop ended (make check LAB=15 reads this)\n", rep.Runtime, time.Now().UTC().Format(time.RFC3339))
	for i, part := range rep.Parts {
		for _, s := range part {
			fmt.Fprintf(&b, "part %d %s exit %d grace %ds took %.3fs\n", i+1, s.Name, s.ExitCode, s.Grace, s.Took.Seconds())
		}
	}
	path, err := state.Path("15-stop-escalation", RecordFile(recordKind(kind)))
	if err != nil {
		return err
	}
	return labrecord.Write(path, b.String())
}
