package main

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/pkg/kubelet"
	"k8s.io/kubernetes/pkg/kubelet/pleg"
	kubepod "k8s.io/kubernetes/pkg/kubelet/pod"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/mycore/podconfig"
	"kubelet-labs/mycore/podworkers"
)

// miniKubelet is the slice of the kubelet this lab needs: the pod manager (the
// desired pods), the pod workers, and the handlers and sync loop that
// connect them (kubelet.go, v1.36.3).
type miniKubelet struct {
	client  kubernetes.Interface // as system:node:NAME
	pods    kubepod.Manager
	workers *podworkers.Workers
	printf  func(format string, args ...any) // every step (silent with --quiet)
	say     func(format string, args ...any) // always printed

	// finished carries the workers' Finished events to the sync loop,
	// which deletes the pod from the apiserver if it was deleted there.
	finished chan podworkers.Event
	// deleting: pods whose final delete we sent (until they are removed).
	deleting map[types.UID]bool
}

var _ podconfig.Handler = (*miniKubelet)(nil)

// syncLoop is syncLoopIteration (kubelet.go:2695-2815) with the three
// channels this lab has: config updates, PLEG events, and housekeeping.
// (The kubelet's syncCh, which drains the resync queue every second, lives
// inside mycore/podworkers.)
func (k *miniKubelet) syncLoop(ctx context.Context, updates <-chan kubetypes.PodUpdate, plegCh <-chan *pleg.PodLifecycleEvent, housekeeping <-chan time.Time, quiet bool) {
	k.deleting = map[types.UID]bool{}
	last := ""
	for {
		select {
		case <-ctx.Done():
			return
		case u, ok := <-updates:
			if !ok {
				return
			}
			for _, p := range u.Pods {
				k.printf("%-9s %s → %s", podconfig.OpName(u.Op), podName(p), handlerFor(u.Op))
			}
			if err := podconfig.Dispatch(ctx, u, k); err != nil {
				k.printf("%v", err)
			}
			for _, p := range u.Pods {
				k.deleteIfFinished(ctx, p)
			}
		case e := <-plegCh:
			// A PLEG event syncs its pod at once, ContainerDied included;
			// ContainerRemoved changes nothing (isSyncPodWorthy, :3453).
			pod, known := k.pods.GetPodByUID(e.ID)
			name := string(e.ID)
			if known {
				name = podName(pod)
			}
			k.printf("PLEG      %s %s %v", e.Type, name, short(fmt.Sprint(e.Data)))
			if known && e.Type != pleg.ContainerRemoved {
				k.HandlePodSyncs(ctx, []*v1.Pod{pod})
			}
		case e := <-k.finished:
			if pod, ok := k.pods.GetPodByUID(e.UID); ok {
				k.deleteIfFinished(ctx, pod)
			}
		case <-housekeeping:
			// HandlePodCleanups (kubelet_pods.go:1205): tell the workers
			// which pods are still wanted; finished ones that are not are
			// forgotten, running ones that are not are terminated.
			all := k.pods.GetPods()
			known := k.workers.SyncKnownPods(all)
			for _, p := range all {
				k.deleteIfFinished(ctx, p) // retries a delete that failed
			}
			if quiet {
				if s := summary(known); s != last {
					k.say("%s", s)
					last = s
				}
			}
		}
	}
}

func handlerFor(op kubetypes.PodOperation) string {
	switch op {
	case kubetypes.ADD:
		return "HandlePodAdditions → UpdatePod(create)"
	case kubetypes.UPDATE, kubetypes.DELETE:
		return "HandlePodUpdates → UpdatePod(update)"
	case kubetypes.REMOVE:
		return "HandlePodRemoves → UpdatePod(kill)"
	case kubetypes.RECONCILE:
		return "HandlePodReconcile (status only: no worker update)"
	}
	return "?"
}

// HandlePodAdditions: into the pod manager, then a create for the worker
// (kubelet.go:2832-2908; admission is left out: every pod is admitted).
func (k *miniKubelet) HandlePodAdditions(ctx context.Context, pods []*v1.Pod) {
	podconfig.ManagerHandler{Pods: k.pods}.HandlePodAdditions(ctx, pods)
	for _, p := range pods {
		k.update(p, kubetypes.SyncPodCreate)
	}
}

// HandlePodUpdates: a changed pod, or a graceful delete (DELETE is handled
// as an UPDATE): the worker sees the deletionTimestamp (:2912-2971).
func (k *miniKubelet) HandlePodUpdates(ctx context.Context, pods []*v1.Pod) {
	podconfig.ManagerHandler{Pods: k.pods}.HandlePodUpdates(ctx, pods)
	for _, p := range pods {
		k.update(p, kubetypes.SyncPodUpdate)
	}
}

// HandlePodRemoves: the pod is gone from the apiserver; kill it if it still
// runs (:3059-3092, deletePod :2569-2585).
func (k *miniKubelet) HandlePodRemoves(ctx context.Context, pods []*v1.Pod) {
	podconfig.ManagerHandler{Pods: k.pods}.HandlePodRemoves(ctx, pods)
	for _, p := range pods {
		delete(k.deleting, p.UID)
		if pod, mirror, wasMirror := k.pods.GetPodAndMirrorPod(p); wasMirror {
			if pod != nil { // the mirror pod went; its static pod stays
				k.workers.UpdatePod(kubelet.UpdatePodOptions{Pod: pod, MirrorPod: mirror, UpdateType: kubetypes.SyncPodUpdate})
			}
			continue
		}
		k.workers.UpdatePod(kubelet.UpdatePodOptions{Pod: p, UpdateType: kubetypes.SyncPodKill})
	}
}

// HandlePodReconcile: only the status changed; the kubelet syncs the pod
// only when its Ready condition needs fixing (:3097-3184), which a node
// that posts no status never needs.
func (k *miniKubelet) HandlePodReconcile(ctx context.Context, pods []*v1.Pod) {
	podconfig.ManagerHandler{Pods: k.pods}.HandlePodReconcile(ctx, pods)
}

// HandlePodSyncs: a PLEG event (or a probe, or a resync) for a pod the
// manager has (:3188-3211).
func (k *miniKubelet) HandlePodSyncs(_ context.Context, pods []*v1.Pod) {
	for _, p := range pods {
		k.update(p, kubetypes.SyncPodSync)
	}
}

// update hands a pod to its worker with its mirror pod, if any; a mirror
// pod stands for its static pod (the handlers' GetPodAndMirrorPod step).
func (k *miniKubelet) update(p *v1.Pod, t kubetypes.SyncPodType) {
	pod, mirror, wasMirror := k.pods.GetPodAndMirrorPod(p)
	if wasMirror {
		if pod == nil {
			return // a mirror pod without its static pod
		}
		t = kubetypes.SyncPodUpdate
	}
	k.workers.UpdatePod(kubelet.UpdatePodOptions{Pod: pod, MirrorPod: mirror, UpdateType: t})
}

// onWorkerEvent prints each step of each worker; Finished is also passed
// to the sync loop.
func (k *miniKubelet) onWorkerEvent(e podworkers.Event) {
	k.printf("worker    %s", e)
	if e.Kind == podworkers.Finished {
		select {
		case k.finished <- e:
		default: // the loop is gone or busy; housekeeping checks every pod anyway
		}
	}
}

// deleteIfFinished is what the status manager does for a pod deleted in
// the apiserver once its worker finished: delete it for good, grace 0,
// with the pod's UID as precondition so a new pod of the same name is
// never hit (status_manager.go:1210-1223, canBeDeleted :1241). Until then
// the pod stays Terminating in kubectl.
func (k *miniKubelet) deleteIfFinished(ctx context.Context, p *v1.Pod) {
	if p.DeletionTimestamp == nil || k.deleting[p.UID] || !k.workers.ShouldPodBeFinished(p.UID) {
		return
	}
	if _, ok := k.pods.GetPodByUID(p.UID); !ok {
		return // removed already (REMOVE came)
	}
	err := k.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64),
		Preconditions:      metav1.NewUIDPreconditions(string(p.UID)),
	})
	switch {
	case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Conflict: the UID precondition failed, another pod has the name now.
		k.deleting[p.UID] = true
		k.printf("apiserver %s: terminated and deleted → DELETE grace 0 (as the status manager does)", podName(p))
	default:
		k.printf("apiserver %s: final delete failed, retried at housekeeping: %v", podName(p), err)
	}
}

// summary counts the workers by state, for --quiet.
func summary(known map[types.UID]kubelet.PodWorkerSync) string {
	n := map[kubelet.PodWorkerState]int{}
	for _, s := range known {
		n[s.State]++
	}
	return fmt.Sprintf("workers: %d sync, %d terminating, %d terminated", n[kubelet.SyncPod], n[kubelet.TerminatingPod], n[kubelet.TerminatedPod])
}
