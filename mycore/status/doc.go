// Package status is our kubelet's status manager: the one place that
// writes pod status to the apiserver, and that deletes a pod object for
// good once its containers are gone.
//
// It is a compact rewrite of pkg/kubelet/status/status_manager.go
// (Kubernetes v1.36.3); line numbers in comments refer to that file unless
// another is named. The kubelet's own manager works, but its Start runs
// its loop under wait.Forever (:283) on a ticker it never stops (:280), so
// every node leaks a goroutine; Run here ends with its context.
//
// What it keeps from upstream:
//   - Statuses are cached per pod UID with a version that grows with every
//     change (versionedPodStatus :52, updateStatusInternal :849). The sync loop
//     remembers which version the apiserver has (apiStatusVersions) and
//     posts only newer ones; a status equal to the cached one, ignoring
//     condition timestamps and fields the kubelet does not own, is not even
//     a new version (isPodStatusByKubeletEqual :230).
//   - Before patching, the pod is read from the apiserver: gone means
//     nothing to do, another UID means the pod was deleted and created
//     again under the same name, and the old status is dropped (syncPod
//     :1151). The patch is statusutil.PatchPodStatus, a strategic merge
//     patch that carries the UID as a precondition and no resourceVersion,
//     so it never conflicts with other writers of the pod and never lands
//     on a newer pod of the same name.
//   - A pod never leaves a terminal phase, a terminated container never
//     runs again unless its restart policy allows it
//     (checkContainerStateTransition :769), and a terminal phase is not
//     posted while containers could still run (mergePodStatus :1359, asking
//     the DeletionSafety, which is the pod workers).
//   - TerminatePod marks every container that is not terminated as
//     terminated, exit code 137, reason ContainerStatusUnknown (:637).
//   - The final delete, grace 0 with the UID as precondition, once the pod
//     has a deletionTimestamp, its phase in the apiserver is terminal and
//     TerminatePod was called (canBeDeleted :1241): the kubelet is the
//     last to let go of a pod, and until then kubectl shows Terminating.
//   - A static pod exists in the apiserver only as its mirror pod, so its
//     status is posted there (Options.Mirrors, upstream's PodManager
//     translation): held while it has no mirror pod, the version the
//     apiserver has kept per mirror pod UID (a mirror pod made again gets
//     the status anew, :1102-1111), the UID check done on the translated
//     UID (TranslatePodUID, :1170). A mirror pod is never the final
//     delete's: it belongs to the kubelet's mirror client.
//
// What it leaves out: in-place resize conditions, update notifiers,
// metrics.
//
// Generate is the kubelet's generateAPIPodStatus (kubelet_pods.go:1891):
// the API status made from the runtime's view of the pod.
package status
