package teachloop

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet"
	"k8s.io/kubernetes/pkg/kubelet/pleg"
	kubepod "k8s.io/kubernetes/pkg/kubelet/pod"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/mycore/journal"
	"kubelet-labs/mycore/podconfig"
	"kubelet-labs/mycore/podworkers"
)

// Options configure a Loop.
type Options struct {
	// Client acts as the node (system:node:NAME): the final delete.
	Client kubernetes.Interface
	// Pods is the pod manager the handlers fill: the pods the node should run.
	Pods kubepod.Manager
	// Journal gets every step (config ops, PLEG events, worker steps), for
	// the terminal and the live view; Log, if Journal is nil, gets them as
	// lines; neither: silent (the lab's --quiet).
	Journal *journal.Bus
	Log     func(format string, args ...any)
	// Summary, if set, gets one line of the workers' counts at
	// housekeeping whenever they changed (the lab's --quiet).
	Summary func(format string, args ...any)
}

// Loop is the sync loop and the handlers around the pod workers. The
// config handlers are mycore/podworkers' (the same as mycore/mykubelet's),
// set by Run; HandlePodRemoves also forgets the final delete it sent.
type Loop struct {
	podworkers.Handlers
	o Options
	// journal gets every step (Options.Journal or Log).
	journal *journal.Bus
	// finished carries the workers' Finished events to the loop, which
	// deletes the pod from the apiserver if it is being deleted there.
	finished chan types.UID
	// deleting: pods whose final delete was sent (until they are removed).
	// Owned by Run's goroutine.
	deleting map[types.UID]bool
}

// New makes a Loop. Give OnWorkerEvent to the pod workers, then Run it.
func New(o Options) *Loop {
	return &Loop{o: o, journal: journal.Or(o.Journal, o.Log), finished: make(chan types.UID, 1000), deleting: map[types.UID]bool{}}
}

var _ podconfig.Handler = (*Loop)(nil)

// Run is syncLoopIteration (kubelet.go:2695-2815) with the three inputs
// this lab has: config updates, PLEG events and the housekeeping tick,
// plus the workers' Finished events for the final delete. (The kubelet's
// syncCh, which drains the resync queue every second, lives inside
// mycore/podworkers.) It returns when ctx ends or updates closes.
func (l *Loop) Run(ctx context.Context, workers *podworkers.Workers, updates <-chan kubetypes.PodUpdate, plegCh <-chan *pleg.PodLifecycleEvent, housekeeping <-chan time.Time) {
	l.Handlers = podworkers.Handlers{Pods: l.o.Pods, Workers: workers}
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
				e := journal.Entry{Kind: journal.Config, Pod: klog.KObj(p).String(), UID: string(p.UID), Call: podconfig.OpName(u.Op)}
				l.journal.Say(e, "%-9s %s → %s", podconfig.OpName(u.Op), klog.KObj(p), handlerFor(u.Op))
			}
			if err := podconfig.Dispatch(ctx, u, l); err != nil {
				l.journal.Printf(journal.Other, "%v", err)
			}
			for _, p := range u.Pods {
				l.deleteIfFinished(ctx, p)
			}
		case e := <-plegCh:
			// A PLEG event syncs its pod at once, ContainerDied included;
			// ContainerRemoved changes nothing (isSyncPodWorthy, :3453).
			pod, known := l.o.Pods.GetPodByUID(e.ID)
			name := string(e.ID)
			if known {
				name = klog.KObj(pod).String()
			}
			pe := journal.Entry{Kind: journal.PLEG, UID: string(e.ID), Call: string(e.Type)}
			if name != string(e.ID) {
				pe.Pod = name
			}
			l.journal.Say(pe, "PLEG      %s %s %v", e.Type, name, short(fmt.Sprint(e.Data)))
			if known && e.Type != pleg.ContainerRemoved {
				l.HandlePodSyncs(ctx, []*v1.Pod{pod})
			}
		case uid := <-l.finished:
			if pod, ok := l.o.Pods.GetPodByUID(uid); ok {
				l.deleteIfFinished(ctx, pod)
			}
		case <-housekeeping:
			// HandlePodCleanups (kubelet_pods.go:1205): tell the workers
			// which pods are still wanted; finished ones that are not are
			// forgotten, running ones that are not are terminated.
			all := l.o.Pods.GetPods()
			known := workers.SyncKnownPods(all)
			for _, p := range all {
				l.deleteIfFinished(ctx, p) // retries a delete that failed
			}
			if l.o.Summary != nil {
				if s := summary(known); s != last {
					l.o.Summary("%s", s)
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

// HandlePodRemoves is podworkers.Handlers' (kill the pod if it still
// runs); a pod removed needs no final delete any more.
func (l *Loop) HandlePodRemoves(ctx context.Context, pods []*v1.Pod) {
	l.Handlers.HandlePodRemoves(ctx, pods)
	for _, p := range pods {
		delete(l.deleting, p.UID)
	}
}

// OnWorkerEvent is the workers' OnEvent: it prints each step of each
// worker and passes Finished to the loop.
func (l *Loop) OnWorkerEvent(e podworkers.Event) {
	l.journal.Say(e.JournalEntry(), "worker    %s", e)
	if e.Kind == podworkers.Finished {
		select {
		case l.finished <- e.UID:
		default: // the loop is gone or busy; housekeeping checks every pod anyway
		}
	}
}

// deleteIfFinished is the status manager's last step: a pod being deleted
// whose work is over is deleted for good, grace 0, with its UID as
// precondition so a new pod of the same name is never hit
// (status_manager.go:1209-1224). Until then the pod stays Terminating in
// kubectl.
//
// Upstream's canBeDeleted (status_manager.go:1241-1258) asks four things:
// a deletionTimestamp, not a mirror pod (:1242), a terminal phase in the
// apiserver's copy of the pod (:1247), and that the status being synced is
// the final one TerminatePod set after SyncTerminatedPod (podIsFinished,
// :1253). This lab posts no status, so its pods' phase stays Pending and
// the third test would never pass: it is left out. The fourth becomes
// "the worker has finished" (ShouldPodBeFinished: SyncTerminatedPod
// succeeded).
func (l *Loop) deleteIfFinished(ctx context.Context, p *v1.Pod) {
	if p.DeletionTimestamp == nil || kubetypes.IsMirrorPod(p) || l.deleting[p.UID] || !l.Workers.ShouldPodBeFinished(p.UID) {
		return
	}
	if _, ok := l.o.Pods.GetPodByUID(p.UID); !ok {
		return // removed already (REMOVE came)
	}
	err := l.o.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64),
		Preconditions:      metav1.NewUIDPreconditions(string(p.UID)),
	})
	switch {
	case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Conflict: the UID precondition failed, another pod has the name now.
		l.deleting[p.UID] = true
		l.journal.Say(journal.Entry{Kind: journal.Status, Pod: klog.KObj(p).String(), UID: string(p.UID), Call: "DeletePod"},
			"apiserver %s: terminated and deleted → DELETE grace 0 (as the status manager does)", klog.KObj(p))
	default:
		l.journal.Printf(journal.Status, "apiserver %s: final delete failed, retried at housekeeping: %v", klog.KObj(p), err)
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

// short is the 13 characters crictl shows of an ID.
func short(id string) string {
	if id == "" {
		return "(none)"
	}
	return id[:min(13, len(id))]
}
