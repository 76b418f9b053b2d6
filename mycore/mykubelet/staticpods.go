package mykubelet

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	kubeletpkg "k8s.io/kubernetes/pkg/kubelet"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/mycore/podconfig"
)

// Static pods come from manifest files in Options.StaticPodPath (lab 08):
// the node runs them without the apiserver, and shows each one there as a
// mirror pod, which it creates, keeps matching, and deletes when the
// static pod is gone. The mirror pod carries the static pod's status
// (mycore/status); deleting it deletes nothing that runs — the next sync
// of the static pod makes it again.

// fileSource starts the static pod source, or returns nil (no file
// source) when Options.StaticPodPath is empty.
func (k *Kubelet) fileSource(ctx context.Context) <-chan kubetypes.PodUpdate {
	if k.o.StaticPodPath == "" {
		return nil
	}
	// A bad manifest is reported at every read of the folder (20 s): once
	// a minute is enough to see it.
	logger := podconfig.LineLogger(func(line string) { k.log("file    %s", line) }, 0, time.Minute)
	return podconfig.Files(ctx, logger, k.o.StaticPodPath, k.o.NodeName, k.o.FileCheckFrequency)
}

// reconcileMirrorPod is SyncPod's "Create Mirror Pod for Static Pod if it
// doesn't already exist" (tryReconcileMirrorPods, kubelet.go:2185-2186,
// :3470-3505): for a static pod, create its mirror pod if it has none,
// and replace one that is being deleted or no longer matches the
// manifest (its config.mirror hash differs from the static pod's).
//
// The mirror pod compared is the pod manager's, not the one the worker was
// handed: our workers' resync repeats their last update, mirror pod
// included, where upstream's resync asks the pod manager again
// (HandlePodSyncs, kubelet.go:3188); and after a REMOVE of the mirror pod
// (a forced delete) the update carries the pod that is gone, which would
// look like a mirror pod that needs nothing.
func (k *Kubelet) reconcileMirrorPod(ctx context.Context, pod, _ *v1.Pod) {
	if !kubetypes.IsStaticPod(pod) {
		return
	}
	mirrorPod, _ := k.pods.GetMirrorPodByPod(pod)
	for _, a := range k.mirrors.SyncStatic(ctx, pod, mirrorPod) {
		k.log("mirror  %s", a)
	}
}

// deleteOrphanedMirrorPods is the mirror part of HandlePodCleanups
// (kubelet_pods.go:1317-1329): a mirror pod whose static pod is gone is
// deleted — once that static pod has stopped: while its worker still
// terminates it, its mirror pod shows how that goes
// (IsPodForMirrorPodTerminatingByFullName, pod_workers.go:726).
func (k *Kubelet) deleteOrphanedMirrorPods(ctx context.Context) {
	_, _, orphans := k.pods.GetPodsAndMirrorPods()
	if len(orphans) == 0 {
		return
	}
	terminating := map[string]bool{}
	for _, s := range k.workers.Snapshot() {
		if s.State == kubeletpkg.TerminatingPod {
			terminating[s.Pod] = true
		}
	}
	for _, fullName := range orphans {
		name, namespace, err := kubecontainer.ParsePodFullName(fullName)
		if err != nil || terminating[namespace+"/"+name] {
			continue
		}
		ok, err := k.mirrors.Client.DeleteMirrorPod(ctx, fullName, nil)
		switch {
		case err != nil:
			k.log("mirror  %s: deleting the orphaned mirror pod: %v", fullName, err)
		case ok:
			k.log("mirror  %s: deleted: its static pod is gone (orphaned mirror pod)", fullName)
		}
	}
}
