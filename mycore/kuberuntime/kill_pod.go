package kuberuntime

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"kubelet-labs/mycore/cri"
)

// KillPodWithSyncResult is killPodWithSyncResult
// (kuberuntime_manager.go:1953-1972, v1.36.3): it stops a pod, and says
// how each step went in a PodSyncResult.
//
//  1. First the containers, all at once (killContainersWithSyncResult): its
//     SyncResults, one per container, go into the result. So a pod of
//     three containers that all ignore SIGTERM takes one grace period, not
//     three.
//  2. Only then the sandboxes: one SyncResult of action KillPodSandbox,
//     target runningPod.ID, goes into the result, and StopPodSandbox
//     (m.stopSandbox) is called for every sandbox in runningPod.Sandboxes,
//     even after one failed. A NotFound error (isNotFound) is success —
//     the sandbox is already gone; any other fails the KillPodSandbox
//     result with kubecontainer.ErrKillPodSandbox and a message naming the
//     sandbox. Why last: stopping a sandbox kills whatever still runs in
//     it at once, without its grace period, and tears its network down.
//
// Nothing is removed: the stopped containers and sandboxes stay in the
// runtime (their logs and exit codes with them) until GarbageCollect.
//
// runningPod is what the runtime runs — build it from a pod status with
// kubecontainer.ConvertPodStatusToRunningPod, as the kubelet's killPod
// does; pod, when known, gives the grace periods, preStop hooks and sidecar
// order, and may be nil.
//
//stage:kill-pod
func (m *Manager) KillPodWithSyncResult(ctx context.Context, pod *v1.Pod, runningPod kubecontainer.Pod, gracePeriodOverride *int64) (result kubecontainer.PodSyncResult) {
	for _, r := range m.killContainersWithSyncResult(ctx, pod, runningPod, gracePeriodOverride) {
		result.AddSyncResult(r)
	}

	sandboxResult := kubecontainer.NewSyncResult(kubecontainer.KillPodSandbox, runningPod.ID)
	result.AddSyncResult(sandboxResult)
	for _, sb := range runningPod.Sandboxes {
		if err := m.stopSandbox(ctx, runningPod, sb.ID.ID); err != nil && !isNotFound(err) {
			sandboxResult.Fail(kubecontainer.ErrKillPodSandbox, fmt.Sprintf("StopPodSandbox %s: %v", cri.ShortID(sb.ID.ID), err))
		}
	}
	return result
}

// killContainersWithSyncResult is kuberuntime_container.go:929-965
// (v1.36.3): it stops every container of runningPod.Containers
// concurrently — one goroutine each, all started before any is waited
// for — with m.killContainer (reason ReasonUnknown, no message, the
// override), and returns once all have stopped: one SyncResult of action
// KillContainer per container, target its name, failed with
// kubecontainer.ErrKillContainer and the error's text when the kill
// failed; in any order (upstream's is the order they finished).
//
// A pod with sidecars (hasSidecars: restartable init containers) needs a
// termination order, built once for the pod from the names of the running
// containers (newTerminationOrdering) and given to every killContainer:
// each sidecar then waits until the main containers — and the sidecars
// started after it — have stopped, within its grace period. Without
// sidecars, pass nil.
//
// A panic in one goroutine must not take the node down: upstream defers
// utilruntime.HandleCrashWithContext(ctx) in each.
//
//stage:kill-pod
func (m *Manager) killContainersWithSyncResult(ctx context.Context, pod *v1.Pod, runningPod kubecontainer.Pod, override *int64) []*kubecontainer.SyncResult {
	results := make(chan *kubecontainer.SyncResult, len(runningPod.Containers))
	var wg sync.WaitGroup

	var ordering *terminationOrdering
	if hasSidecars(pod) {
		var names []string
		for _, c := range runningPod.Containers {
			names = append(names, c.Name)
		}
		ordering = newTerminationOrdering(pod, names)
	}
	wg.Add(len(runningPod.Containers))
	for _, c := range runningPod.Containers {
		go func(c *kubecontainer.Container) {
			defer utilruntime.HandleCrashWithContext(ctx)
			defer wg.Done()
			r := kubecontainer.NewSyncResult(kubecontainer.KillContainer, c.Name)
			if err := m.killContainer(ctx, pod, c.ID, c.Name, ReasonUnknown, override, ordering, ""); err != nil {
				r.Fail(kubecontainer.ErrKillContainer, err.Error())
			}
			results <- r
		}(c)
	}
	wg.Wait()
	close(results)

	var out []*kubecontainer.SyncResult
	for r := range results {
		out = append(out, r)
	}
	return out
}
