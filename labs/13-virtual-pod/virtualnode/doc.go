// Package virtualnode is lab 13's node without containers — a teaching copy
// of the kubelet's sync loop and of its four sync methods, around a
// runtime that runs no containers — where every other node of ours runs
// mycore/mykubelet on a CRI runtime (internal/labnode starts those). It is
// not our kubelet: that is mycore/mykubelet (labs 17 and 18), and
// upstream's is pkg/kubelet.
//
// Why a copy: the lab shows that the kubelet's structure — pod manager, pod
// workers, pod cache, status manager — does not depend on containers.
// mycore/mykubelet is built around a CRI runtime (a PLEG relisting it, the
// runtime manager, probes, mirror pods, garbage collection); this package
// keeps the parts that are the same and swaps the runtime for one that
// interprets each container's command in this process (`http-get URL`).
// The parts that are the same are used, not copied: the pod workers and
// their config handlers (mycore/podworkers, Handlers), the pod sources
// (mycore/podconfig), the status manager and the kubelet's status rules
// (mycore/status, Generate).
//
// What it mirrors (Kubernetes v1.36.3, pkg/kubelet/ unless another folder
// is named):
//
//	Loop.Run             syncLoopIteration, kubelet.go:2695-2815: config updates, the
//	                     runtime's change events (where PLEG events come from), housekeeping
//	Loop's admission     HandlePodAdditions :2832 (admit :2868-2880), rejectPod :2589
//	Loop's housekeeping  HandlePodCleanups, kubelet_pods.go:1205, cut to what this node has
//	Syncer               SyncPod :2019 (status first :2074-2101, terminal :2087-2090),
//	                     SyncTerminatingPod :2289, SyncTerminatingRuntimePod :2426,
//	                     SyncTerminatedPod :2458 (TerminatePod :2521)
//	Runtime              a CRI runtime and the PLEG together: the pod cache written at each
//	                     change, and its clock moved as after a relist (pleg/generic.go:329)
//
// What it does differently from mycore/mykubelet, on purpose:
//   - No CRI and no PLEG. Runtime runs each container as a goroutine of
//     this process (Interpreter) and, since it sees every change as it
//     happens, writes the pod cache itself and tells the loop at once;
//     KeepCacheFresh moves the cache's clock, the one thing left of a
//     relist.
//   - Admission: it rejects pods it cannot run (restartPolicy other than
//     Never, init containers) — Failed, with a reason — before any work
//     starts. mycore/mykubelet admits every pod.
//   - It runs each container once: no restarts, no back-off, no probes.
//   - SyncTerminatedPod calls the status manager's TerminatePod itself, as
//     upstream does (kubelet.go:2521); mycore/mykubelet calls it from its
//     loop when a worker finishes.
//   - Housekeeping forgets stopped pods in Runtime; there are no mirror
//     pods and no garbage collection.
package virtualnode
