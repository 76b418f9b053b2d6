// Package teachloop is lab 10's teaching copy of the kubelet's sync loop
// and of a syncer for the pod workers. It is not our kubelet: that is
// mycore/mykubelet (labs 17 and 18), and upstream's is pkg/kubelet.
//
// Why a copy: the lab's subject is the pod workers (mycore/podworkers), and
// a learner has to see every step they take. mycore/mykubelet wraps them in a
// runtime manager, probes, a status manager, mirror pods and a garbage
// collector, whose own steps would bury the workers'. This copy keeps only
// what feeds the workers and what they call, and prints each step.
//
// What it mirrors (Kubernetes v1.36.3, pkg/kubelet/ unless another folder
// is named):
//
//	Loop.Run                  syncLoopIteration, kubelet.go:2695-2815, with three of its
//	                          inputs: config updates, PLEG events (isSyncPodWorthy
//	                          :3453), housekeeping (HandlePodCleanups, kubelet_pods.go:1205,
//	                          cut to SyncKnownPods :1238)
//	the handlers              HandlePodAdditions :2832, HandlePodUpdates :2912,
//	                          HandlePodRemoves :3059, HandlePodSyncs :3188 — these are
//	                          mycore/podworkers.Handlers, the same code as mycore/mykubelet's
//	Loop's final delete       the status manager's, status/status_manager.go:1209-1224
//	Syncer.SyncPod            SyncPod, kubelet.go:2019 (terminal :2087-2090), with
//	                          kuberuntime_manager.go's createPodSandbox + startContainer
//	Syncer.SyncTerminatingPod SyncTerminatingPod :2289 → killPodWithSyncResult,
//	                          kuberuntime/kuberuntime_manager.go:1953 (containers in
//	                          parallel, kuberuntime_container.go:929, then the sandbox)
//	Syncer.SyncTerminatingRuntimePod  :2426 (grace 1, :2438)
//	Syncer.SyncTerminatedPod  :2458
//
// What it does differently from mycore/mykubelet, on purpose:
//   - It prints every step: the config op and the handler it goes to, each
//     PLEG event, each worker step (podworkers.Event), each syncer decision
//     and each CRI call, stamped to the millisecond.
//   - Its syncer calls the CRI itself (no mycore/kuberuntime): it creates a
//     pod's sandbox and containers once, never restarts a container, and
//     stops containers with the grace period the workers decided, as is
//     (the kubelet, and mycore/kuberuntime, never pass less than 2 s:
//     kuberuntime_manager.go:84), so the workers' arithmetic is what shows.
//   - SyncTerminatedPod removes the pod's containers and sandbox. The
//     kubelet's only releases resources and leaves removal to the container
//     garbage collector (kuberuntime/kuberuntime_gc.go); the lab removes
//     them so the end of a pod shows in the runtime too.
//   - It has no status manager and posts no pod status (kubectl keeps
//     saying Pending; status is labs 13 and 17). So its final delete cannot
//     wait, as upstream's canBeDeleted does (status_manager.go:1247), for a
//     terminal phase in the apiserver: it deletes a pod being deleted as
//     soon as its worker has finished.
//   - No admission, probes, mirror pods of static pods or garbage
//     collection.
package teachloop
