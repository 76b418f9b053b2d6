// Lab 16 is how the kubelet stops a whole pod and when it removes it.
// KillPod stops every container at once — one goroutine each, one
// SyncResult each — and only then stops the sandbox, which tears the pod's
// network down. It removes nothing: the stopped containers and sandbox stay
// in the runtime, exit codes and logs with them, until the garbage
// collector removes them. The collector asks the pod workers, and they say
// yes once the pod is deleted (its deletionTimestamp seen) and terminated
// (KillPod done) — while the pod object may still be in the apiserver.
//
// The lab creates pod default/kill-demo (pod.yaml: three containers that
// all ignore SIGTERM, grace period 3 s) in the real apiserver, bound to
// node lab-node-16 that no kubelet serves, runs it on the mock CRI in this
// process (or on containerd), deletes it, and plays the kubelet's part:
// KillPod (mycore/kuberuntime), a garbage collection, and the status
// manager's final delete.
//
//	go run ./labs/00-cluster                               # another terminal
//	go run ./labs/16-kill-pod                              # on the mock CRI
//	sudo scripts/containerd-up.sh                          # once: the course's only root command
//	go run ./labs/16-kill-pod --runtime containerd         # on containerd
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/moby/sys/mountinfo"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
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

type options struct{ labpod.Options }

func main() {
	var o options
	labenv.Main(labenv.Lab{
		Name:  "16-kill-pod",
		Flags: func(fs *flag.FlagSet) { o.Register(fs, "lab-node-16") },
		Run: func(ctx context.Context, out *labenv.Printer) error {
			_, err := run(ctx, o, out)
			return err
		},
	})
}

// report is what the lab saw, for its test.
type report struct {
	KillTook       time.Duration
	Results        []*kubecontainer.SyncResult
	ExitCodes      map[string]int32
	SandboxAfter   runtimeapi.PodSandboxState
	NetnsBefore    string // containerd: the sandbox's network namespace file
	NetnsGoneAfter bool
	GC             kuberuntime.GCResult
	ObjectAtGC     bool // the pod object was still in the apiserver when the GC ran
	LeftAfterGC    int  // sandboxes + containers of the pod after the GC
	Gone           bool // the pod object is gone at the end
}

// podWorker is what the kubelet's pod worker knows of our pod — and all
// the garbage collector asks (podWorkers.ShouldPodRuntimeBeRemoved and
// ShouldPodContentBeRemoved, pod_workers.go:704-724 at v1.36.3). Neither
// question goes to the apiserver.
type podWorker struct {
	uid types.UID
	// deleted: the worker saw the pod's deletionTimestamp (or found the pod
	// in the runtime only) and began its termination (:875-884).
	deleted bool
	// terminated: SyncTerminatingPod returned, no container runs any more
	// (completeTerminating, :1435-1450).
	terminated bool
}

// ShouldPodRuntimeBeRemoved: its containers and sandboxes may go once it
// is terminated (the kubelet uses this only under disk pressure).
func (w *podWorker) ShouldPodRuntimeBeRemoved(uid types.UID) bool {
	if uid != w.uid {
		return true // no worker knows it: a kill-demo of an interrupted run
	}
	return w.terminated
}

// ShouldPodContentBeRemoved: everything of it — dead containers, their
// logs, sandboxes, the pod log folder — may go once it is deleted and
// terminated.
func (w *podWorker) ShouldPodContentBeRemoved(uid types.UID) bool {
	if uid != w.uid {
		return true
	}
	return w.deleted && w.terminated
}

func run(ctx context.Context, o options, w *labenv.Printer) (*report, error) {
	// The cluster, the runtime, and pod kill-demo: created in the
	// apiserver, bound to our node, started in the runtime by our SyncPod.
	s, err := labpod.Begin(ctx, o.Options, "16-kill-pod", podYAML, w)
	if err != nil {
		return nil, err
	}
	finished := false
	// An error or Ctrl-C on the way: leave nothing behind. A run to the
	// end has nothing left to clean: the garbage collector removed it.
	defer func() { s.End(!finished) }()
	client, c, m, pod, out := s.Client, s.RT.CRI, s.M, s.Pod, s.Out
	rep := &report{ExitCodes: map[string]int32{}}

	running, _, err := labpod.RunningPod(ctx, c, pod)
	if err != nil {
		return nil, err
	}
	sandboxID := running.Sandboxes[0].ID.ID
	before, err := showSandbox(ctx, c, sandboxID, "", out)
	if err != nil {
		return nil, err
	}
	rep.NetnsBefore = before

	// The delete. Without --grace-period the apiserver takes the
	// spec's; the pod object now waits for its kubelet.
	worker := &podWorker{uid: pod.UID}
	out.Printf("\n1. DELETE pods/%s   (kubectl delete pod %s: no --grace-period, so the spec's)", pod.Name, pod.Name)
	if err := client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		return nil, err
	}
	if pod, err = client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{}); err != nil {
		return nil, err
	}
	out.Printf("   metadata.deletionGracePeriodSeconds=%ds, deletionTimestamp=%s", *pod.DeletionGracePeriodSeconds, pod.DeletionTimestamp.UTC().Format(time.RFC3339))
	worker.deleted = pod.DeletionTimestamp != nil
	out.Printf("   the pod worker sees the deletionTimestamp: deleted, its termination begins (SyncTerminatingPod)")

	// KillPod: what the kubelet's SyncTerminatingPod calls with the pod
	// and what still runs of it.
	n := len(running.Containers)
	out.Printf("\n2. KillPod: the %d containers at once, then the sandbox", n)
	out.Start()
	result := m.KillPodWithSyncResult(ctx, pod, running, nil)
	rep.KillTook = out.Stop()
	rep.Results = result.SyncResults
	out.Printf("   SyncResults, in the order they came back:")
	for _, r := range result.SyncResults {
		status := "ok"
		if r.Error != nil {
			status = fmt.Sprintf("%v: %s", r.Error, r.Message)
		}
		out.Printf("     %-15s %-36v %s", r.Action, r.Target, status)
	}
	if err := result.Error(); err != nil {
		return nil, err
	}
	out.Printf("   KillPod took %.3fs: %d grace periods of %ds side by side (one after another: %ds)",
		rep.KillTook.Seconds(), n, *pod.DeletionGracePeriodSeconds, int64(n)**pod.DeletionGracePeriodSeconds)
	if _, err := showSandbox(ctx, c, sandboxID, before, out); err != nil {
		return nil, err
	}
	st, err := c.PodStatus(ctx, sandboxID)
	if err != nil {
		return nil, err
	}
	rep.SandboxAfter = st.State
	rep.NetnsGoneAfter = before != "" && netnsGone(before)
	worker.terminated = true
	out.Printf("   SyncTerminatingPod is done: the pod worker marks the pod terminated")

	// Nothing was removed.
	out.Printf("\n3. Nothing was removed: KillPod stops, the garbage collector removes")
	if _, err := showRuntime(ctx, c, pod, rep, out); err != nil {
		return nil, err
	}

	// The garbage collector asks the pod worker, not the apiserver.
	gcOpts := kuberuntime.GCOptions{
		Policy: kuberuntime.DefaultGCPolicy, Pods: worker, AllSourcesReady: true,
		// only this lab's pod: the course's containerd is shared
		Selector: map[string]string{cri.LabelPodNamespace: pod.Namespace, cri.LabelPodName: pod.Name},
	}
	p := gcOpts.Policy
	out.Printf("\n4. Garbage collection, the kubelet's every minute (policy: MinAge %s, MaxPerPodContainer %d, MaxContainers %d — its defaults)",
		p.MinAge, p.MaxPerPodContainer, p.MaxContainers)
	out.Printf("   it asks the pod worker: ShouldPodContentBeRemoved = deleted (%t) and terminated (%t) = %t",
		worker.deleted, worker.terminated, worker.ShouldPodContentBeRemoved(pod.UID))
	if rep.GC, err = m.GarbageCollect(ctx, gcOpts); err != nil {
		return nil, err
	}
	out.Printf("   removed %s", count(rep.GC))
	if rep.LeftAfterGC, err = showRuntime(ctx, c, pod, rep, out); err != nil {
		return nil, err
	}
	if obj, err := client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{}); err == nil && obj.UID == pod.UID {
		rep.ObjectAtGC = true
		out.Printf("   and the pod object is still in the apiserver (Terminating): the collector does not wait for it")
	}

	// The final delete.
	out.Printf("\n5. DELETE pods/%s gracePeriodSeconds=0 (uid precondition): what the status manager sends once nothing of the pod runs", pod.Name)
	if err := labpod.Remove(ctx, client, pod); err != nil {
		return nil, err
	}
	rep.Gone = true
	out.Printf("   pod %s/%s is gone from the apiserver", pod.Namespace, pod.Name)
	finished = true
	if err := writeRecord(s.RT.Kind, s.RT.Name, *pod.DeletionGracePeriodSeconds, rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// showSandbox prints the sandbox's state, pod IP and network namespace.
// before is the namespace file seen earlier, to tell whether it is gone.
func showSandbox(ctx context.Context, c *cri.Client, id, before string, out *labpod.Timeline) (netns string, err error) {
	resp, err := c.Runtime.PodSandboxStatus(c.Context(ctx), id, true)
	if err != nil {
		return "", err
	}
	st := resp.GetStatus()
	netns = netnsPath(resp.GetInfo())
	line := fmt.Sprintf("   sandbox %.13s %s, pod IP %q", id, strings.TrimPrefix(st.State.String(), "SANDBOX_"), st.GetNetwork().GetIp())
	switch {
	case before != "" && netnsGone(before):
		line += fmt.Sprintf(", network namespace %s is gone: StopPodSandbox tore the network down (CNI DEL)", before)
	case netns != "":
		line += fmt.Sprintf(", network namespace %s", netns)
	}
	out.Printf("%s", line)
	return netns, nil
}

// netnsPath digs the network namespace file out of containerd's verbose
// sandbox status (info.runtimeSpec.linux.namespaces); "" elsewhere.
func netnsPath(info map[string]string) string {
	var v struct {
		RuntimeSpec struct {
			Linux struct {
				Namespaces []struct{ Type, Path string }
			}
		}
	}
	if json.Unmarshal([]byte(info["info"]), &v) != nil {
		return ""
	}
	for _, ns := range v.RuntimeSpec.Linux.Namespaces {
		if ns.Type == "network" {
			return ns.Path
		}
	}
	return ""
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}

// netnsGone tells whether a pod's network namespace file is gone. The file
// is a bind mount of the namespace, in containerd's 0700 state folder: the
// learner cannot stat it, but anyone can read the mount table, and
// StopPodSandbox's teardown unmounts it before removing the file.
func netnsGone(path string) bool {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return true
	}
	mounts, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(path))
	return err == nil && len(mounts) == 0
}

// showRuntime prints what the runtime still has of the pod, as
// `crictl ps -a` and `crictl pods` would, records the containers' exit
// codes, and returns how many sandboxes and containers that is.
func showRuntime(ctx context.Context, c *cri.Client, pod *v1.Pod, rep *report, out *labpod.Timeline) (int, error) {
	sel := map[string]string{cri.LabelPodNamespace: pod.Namespace, cri.LabelPodName: pod.Name}
	sbs, err := c.Pods(ctx, sel)
	if err != nil {
		return 0, err
	}
	ctrs, err := c.Runtime.ListContainers(c.Context(ctx), &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		return 0, err
	}
	slices.SortFunc(ctrs, func(a, b *runtimeapi.Container) int { // in the pod's order
		return specIndex(pod, a.GetMetadata().GetName()) - specIndex(pod, b.GetMetadata().GetName())
	})
	if len(sbs)+len(ctrs) == 0 {
		out.Printf("   the runtime has nothing of %s/%s left", pod.Namespace, pod.Name)
		return 0, nil
	}
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "   IN THE RUNTIME\tID\tSTATE\tEXIT\tLOG FILE\t")
	for _, sb := range sbs {
		fmt.Fprintf(tw, "   sandbox\t%.13s\t%s\t\t\t\n", sb.Id, strings.TrimPrefix(sb.State.String(), "SANDBOX_"))
	}
	for _, ct := range ctrs {
		st, err := c.ContainerStatus(ctx, ct.Id)
		if err != nil {
			return 0, err
		}
		rep.ExitCodes[ct.GetMetadata().GetName()] = st.ExitCode
		fmt.Fprintf(tw, "   container %s\t%.13s\t%s\t%d\t%s\t\n", ct.GetMetadata().GetName(), ct.Id,
			strings.TrimPrefix(st.State.String(), "CONTAINER_"), st.ExitCode, fileState(st.LogPath))
	}
	tw.Flush()
	for _, line := range strings.Split(strings.TrimSuffix(table.String(), "\n"), "\n") {
		out.Printf("%s", line)
	}
	return len(sbs) + len(ctrs), nil
}

func specIndex(pod *v1.Pod, name string) int {
	return slices.IndexFunc(pod.Spec.Containers, func(c v1.Container) bool { return c.Name == name })
}

func fileState(path string) string {
	if exists(path) {
		return "kept"
	}
	return "none"
}

func count(r kuberuntime.GCResult) string {
	if len(r.Containers)+len(r.Sandboxes)+len(r.LogDirs) == 0 {
		return "nothing"
	}
	return fmt.Sprintf("%d container(s) with their logs, %d sandbox(es), %d pod log folder(s)", len(r.Containers), len(r.Sandboxes), len(r.LogDirs))
}

// A run to the end leaves nothing: the garbage collector removed the
// pod's containers and sandbox, the final delete its object. So that
// `make check LAB=16` can say what the run did, it keeps a small text
// record in the lab's state folder, one per kind of runtime.

// RecordFile is the record of the last run on a runtime kind: "mock" or
// "containerd" (any flavour), under the state folder's 16-kill-pod/.
func RecordFile(kind string) string { return "last-run-" + kind + ".txt" }

// writeRecord writes what the run saw, one fact a line:
//
//	killpod took 3.066s grace 3s containers 3
//	result KillContainer three ok
//	exit one 137
//	gc removed 3 containers 1 sandboxes 1 logdirs, left 0, object there true
//	object gone true
func writeRecord(kind, runtime string, grace int64, rep *report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# lab 16 on %s, %s: what KillPod and the garbage collector did (make check LAB=16 reads this)\n", runtime, time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "killpod took %.3fs grace %ds containers %d\n", rep.KillTook.Seconds(), grace, len(rep.ExitCodes))
	for _, r := range rep.Results {
		status := "ok"
		if r.Error != nil {
			status = "failed"
		}
		fmt.Fprintf(&b, "result %s %v %s\n", r.Action, r.Target, status)
	}
	names := make([]string, 0, len(rep.ExitCodes))
	for n := range rep.ExitCodes {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(&b, "exit %s %d\n", n, rep.ExitCodes[n])
	}
	fmt.Fprintf(&b, "gc removed %d containers %d sandboxes %d logdirs, left %d, object there %t\n",
		len(rep.GC.Containers), len(rep.GC.Sandboxes), len(rep.GC.LogDirs), rep.LeftAfterGC, rep.ObjectAtGC)
	fmt.Fprintf(&b, "object gone %t\n", rep.Gone)
	if kind != labruntime.Mock {
		kind = labruntime.Containerd
	}
	path, err := state.Path("16-kill-pod", RecordFile(kind))
	if err != nil {
		return err
	}
	return labrecord.Write(path, b.String())
}
