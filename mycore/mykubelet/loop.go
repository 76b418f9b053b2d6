package mykubelet

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/pleg"
	proberesults "k8s.io/kubernetes/pkg/kubelet/prober/results"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/journal"
	"kubelet-labs/mycore/podconfig"
	"kubelet-labs/mycore/podworkers"
)

var _ podconfig.Handler = (*Kubelet)(nil)

// syncLoop is syncLoopIteration (kubelet.go:2695-2815) with its inputs:
// config updates from the apiserver and from the static pod files (nil:
// none), PLEG events, probe results and the housekeeping tick. (The
// kubelet merges its sources into one channel, PodConfig; here each has
// its own. The resync queue the kubelet drains every second lives in
// mycore/podworkers.)
func (k *Kubelet) syncLoop(ctx context.Context, updates, files <-chan kubetypes.PodUpdate, housekeeping <-chan time.Time) {
	// Each source's first update is its whole list, even empty
	// (sourcesReady.AddSource, kubelet.go:2732).
	apiSeen, filesSeen := false, files == nil
	for {
		select {
		case <-ctx.Done():
			return
		case u, ok := <-updates:
			if !ok {
				return
			}
			apiSeen = true
			k.sourcesReady = apiSeen && filesSeen
			for _, p := range u.Pods {
				k.say(journal.Config, p, podconfig.OpName(u.Op), "config  %-9s %s", podconfig.OpName(u.Op), klog.KObj(p))
			}
			if err := podconfig.Dispatch(ctx, u, k); err != nil {
				k.log("config  %v", err)
			}
		case u, ok := <-files:
			if !ok {
				files = nil // it ends with the node's context, after this loop
				continue
			}
			filesSeen = true
			k.sourcesReady = apiSeen && filesSeen
			for _, p := range u.Pods {
				k.say(journal.Config, p, podconfig.OpName(u.Op), "config  %-9s %s (static pod, from a file)", podconfig.OpName(u.Op), klog.KObj(p))
			}
			if err := podconfig.Dispatch(ctx, u, k); err != nil {
				k.log("config  %v", err)
			}
		case e := <-k.plegCh:
			k.handlePLEGEvent(ctx, e)
		case u := <-k.liveness.Updates():
			// Only a failure needs action: the sync kills the container
			// (computePodActions reads the same result).
			if u.Result == proberesults.Failure {
				k.handleProbeSync(ctx, u, "liveness", "")
			}
		case u := <-k.readiness.Updates():
			ready := u.Result == proberesults.Success
			k.status.SetContainerReadiness(u.PodUID, u.ContainerID, ready)
			k.handleProbeSync(ctx, u, "readiness", fmt.Sprintf("SetContainerReadiness(%v), ", ready))
		case u := <-k.startup.Updates():
			started := u.Result == proberesults.Success
			k.status.SetContainerStartup(u.PodUID, u.ContainerID, started)
			k.handleProbeSync(ctx, u, "startup", fmt.Sprintf("SetContainerStartup(%v), ", started))
		case <-housekeeping:
			if !k.sourcesReady {
				// A source that has not listed yet makes its pods look
				// gone: no cleanup may act on that (kubelet.go:2797-2800).
				continue
			}
			k.handlePodCleanups(ctx)
			k.syncPastDeadline(ctx) // deadline.go
			// Probes of pods the node no longer has (HandlePodCleanups,
			// kubelet_pods.go:1288; normally SyncTerminatingPod removed them).
			k.probes.CleanupPods(k.knownPods())
		}
	}
}

// handlePLEGEvent: an event about a known pod syncs it at once
// (isSyncPodWorthy, kubelet.go:3453: every type but ContainerRemoved).
func (k *Kubelet) handlePLEGEvent(ctx context.Context, e *pleg.PodLifecycleEvent) {
	pod, known := k.pods.GetPodByUID(e.ID)
	name := string(e.ID)
	entry := journal.Entry{Kind: journal.PLEG, Call: string(e.Type), UID: string(e.ID)}
	if known {
		name = klog.KObj(pod).String()
		entry.Pod = name
	}
	k.journal.Say(entry, "PLEG    %s %s %v", e.Type, name, shortData(e.Data))
	if known && e.Type != pleg.ContainerRemoved {
		k.HandlePodSyncs(ctx, []*v1.Pod{pod})
	}
}

// handleProbeSync is handleProbeSync (kubelet.go:2817): a probe result
// changed, so sync the pod now rather than at its next resync. did says
// what the loop already did with it.
func (k *Kubelet) handleProbeSync(ctx context.Context, u proberesults.Update, probe, did string) {
	pod, ok := k.pods.GetPodByUID(u.PodUID)
	if !ok {
		return // gone; its workers are being stopped
	}
	result := u.Result.String()
	if u.Result == proberesults.Unknown {
		result = "Unknown"
	}
	e := journal.Entry{Kind: journal.Probe, Pod: klog.KObj(pod).String(), UID: string(pod.UID), Call: probe, State: result, Failed: u.Result == proberesults.Failure}
	k.journal.Say(e, "probe   %s %s %s is %s: %ssync the pod", probe, klog.KObj(pod), cri.ShortID(u.ContainerID.ID), result, did)
	k.HandlePodSyncs(ctx, []*v1.Pod{pod})
}

// knownPods are the UIDs in the pod manager.
func (k *Kubelet) knownPods() map[types.UID]bool {
	uids := map[types.UID]bool{}
	for _, p := range k.pods.GetPods() {
		uids[p.UID] = true
	}
	return uids
}

func shortData(d any) string {
	if s, ok := d.(string); ok {
		return cri.ShortID(s)
	}
	return fmt.Sprint(d)
}

// onWorkerEvent logs each step of each worker. A finished pod needs
// nothing more here: SyncTerminatedPod has called TerminatePod, once, as
// upstream's does (kubelet.go:2521); a second call from here, once the
// status manager had deleted the pod, gave it a status again, and the
// sync of that status met the pod already gone (issue 23: 31 DELETEs and
// 131 status PATCHes answered 404 in a 50,000-pod run).
func (k *Kubelet) onWorkerEvent(e podworkers.Event) {
	k.journal.Say(e.JournalEntry(), "worker  %s", e)
}
