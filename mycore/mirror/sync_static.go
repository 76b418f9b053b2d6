package mirror

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubepod "k8s.io/kubernetes/pkg/kubelet/pod"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
)

// This file is the build-it stage mirror-reconcile (make stage
// NAME=mirror-reconcile): SyncStatic alone, so a learner's copy can
// replace it for a build without touching the rest of the package.

// SyncStatic is tryReconcileMirrorPods (pkg/kubelet/kubelet.go:3470-3505,
// v1.36.3) for one static pod and the mirror pod the pod manager pairs
// with it (nil: none). It returns one Action per write it tried or
// decided against, in order:
//
//   - static is not a static pod (kubetypes.IsStaticPod): nothing.
//   - mirrorPod is set, is not being deleted and is still the mirror of
//     static (kubepod.IsMirrorPodOf: same name and namespace, and its
//     kubernetes.io/config.mirror annotation equals the static pod's
//     kubernetes.io/config.hash): nothing — it is right as it is.
//   - mirrorPod is set and is being deleted (DeletionTimestamp) or no
//     longer matches (the manifest was edited): delete it through
//     r.Client.DeleteMirrorPod with the static pod's full name and the
//     mirror pod's UID as precondition, so that only this mirror pod goes,
//     never a newer one of the same name. An error: Action{Replaced, Err}
//     and stop; deleted: Action{Replaced} and go on to create; neither
//     (already gone, or another UID now): Action{Skipped} and stop.
//   - no mirrorPod, or it was just deleted: before creating, read the Node
//     through r.Nodes when it is set: an error is Action{Skipped, Err}; a
//     Node being deleted is Action{Skipped} (no mirror pod for a node on
//     its way out). Otherwise r.Client.CreateMirrorPod(static):
//     Action{Created}, with its error if any — except AlreadyExists, which
//     is Action{Skipped}: the mirror pod is there already and the
//     apiserver source will deliver it to the pod manager.
//
// Every Action's Pod is the static pod's full name
// (kubecontainer.GetPodFullName) and its Reason one line that says why.
//
//stage:mirror-reconcile
func (r *Reconciler) SyncStatic(ctx context.Context, static, mirrorPod *v1.Pod) []Action {
	if !kubetypes.IsStaticPod(static) {
		return nil
	}
	fullName := kubecontainer.GetPodFullName(static)
	hash := static.Annotations[kubetypes.ConfigHashAnnotationKey]
	var actions []Action
	deleted := false
	if mirrorPod != nil {
		reason := ""
		switch {
		case mirrorPod.DeletionTimestamp != nil:
			reason = fmt.Sprintf("mirror pod %s is being deleted", mirrorPod.UID)
		case !kubepod.IsMirrorPodOf(mirrorPod, static):
			reason = fmt.Sprintf("mirror pod %s has %s=%s, the static pod now has hash %s",
				mirrorPod.UID, kubetypes.ConfigMirrorAnnotationKey, short(mirrorPod.Annotations[kubetypes.ConfigMirrorAnnotationKey]), short(hash))
		}
		if reason != "" {
			// The UID precondition deletes this mirror pod only, not a
			// newer one somebody made meanwhile (kubelet.go:3484).
			uid := mirrorPod.UID
			ok, err := r.Client.DeleteMirrorPod(ctx, fullName, &uid)
			switch {
			case err != nil:
				actions = append(actions, Action{Verb: Replaced, Pod: fullName, Reason: reason, Err: err})
			case ok:
				deleted = true
				actions = append(actions, Action{Verb: Replaced, Pod: fullName, Reason: reason})
			default:
				// NotFound or a UID conflict: somebody was faster; the
				// apiserver source will tell us what is there now.
				actions = append(actions, Action{Verb: Skipped, Pod: fullName, Reason: reason + "; it was already gone"})
			}
		}
	}
	if mirrorPod != nil && !deleted {
		return actions
	}
	if r.Nodes != nil {
		n, err := r.Nodes.Get(r.NodeName)
		if err != nil {
			return append(actions, Action{Verb: Skipped, Pod: fullName, Reason: "cannot read Node " + r.NodeName, Err: err})
		}
		if n.DeletionTimestamp != nil {
			return append(actions, Action{Verb: Skipped, Pod: fullName, Reason: "Node " + r.NodeName + " is being deleted"})
		}
	}
	a := Action{Verb: Created, Pod: fullName, Reason: fmt.Sprintf("%s=%s, owner Node/%s", kubetypes.ConfigMirrorAnnotationKey, short(hash), r.NodeName)}
	a.Err = r.Client.CreateMirrorPod(ctx, static)
	if apierrors.IsAlreadyExists(a.Err) {
		// Made by an earlier pass (or it is the old one on its way out):
		// the pod manager learns of it when the apiserver source
		// delivers it, and the next pass compares it.
		a = Action{Verb: Skipped, Pod: fullName, Reason: "a pod of that name exists already; waiting for the apiserver source to deliver it"}
	}
	return append(actions, a)
}

// short is the first 8 characters of a hash, enough to tell two apart.
func short(h string) string {
	if len(h) > 8 {
		return h[:8]
	}
	return h
}
