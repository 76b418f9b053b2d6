package mykubelet

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"kubelet-labs/mycore/configsecret"
	"kubelet-labs/mycore/status"
	"kubelet-labs/mycore/volumes"
)

// newVolumes is the kubelet's volume manager (NewVolumeManager, kubelet.go:1053) for a
// node with a PodsDir: ConfigMaps and Secrets read as the node,
// service account tokens from a token cache that refreshes them before
// they expire (volumes.Tokens), the node's allocatable from its Node object.
// No PodsDir: nil, and pods run without their volumes (mock runtime).
func newVolumes(o Options, log func(string, ...any)) (*volumes.Manager, error) {
	if o.PodsDir == "" {
		return nil, nil
	}
	return volumes.New(volumes.Options{
		PodsDir:         o.PodsDir,
		Objects:         configsecret.New(o.Client),
		Tokens:          volumes.NewTokens(o.Client),
		NodeAllocatable: nodeAllocatable(o.Client, o.NodeName),
		Log:             func(format string, args ...any) { log(format, args...) },
	})
}

// setUpVolumes is WaitForAttachAndMount in SyncPod (kubelet.go:2196):
// the pod's containers start only once every volume is there. A volume
// that cannot be made keeps each container in the kubelet's default
// waiting state — PodInitializing when the pod has init containers, else
// ContainerCreating (kubelet_pods.go:2499-2502) — and the sync fails: the
// workers retry it after their back-off, so a ConfigMap created later is
// found then. Upstream says which volume and why only in a FailedMount
// event; ours says it in the containers' waiting message too, and takes
// it back once the volumes are there, so a later status does not show an
// old failure (the reasons of a start the runtime made stay).
func (k *Kubelet) setUpVolumes(pod *v1.Pod) error {
	if k.volumes == nil {
		return nil
	}
	err := k.volumes.SetUp(pod)
	if err == nil {
		k.reasons.forgetMessages(pod.UID, mountFailed)
		return nil
	}
	msg := mountFailed + err.Error()
	waiting := status.ContainerCreating
	if len(pod.Spec.InitContainers) > 0 {
		waiting = status.PodInitializing
	}
	var r kubecontainer.PodSyncResult
	for _, c := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		sr := kubecontainer.NewSyncResult(kubecontainer.StartContainer, c.Name)
		sr.Fail(errors.New(waiting), msg)
		r.AddSyncResult(sr)
	}
	k.reasons.update(pod.UID, r)
	k.status.SetPodStatus(pod, k.generateStatus(pod, k.podStatusOrEmpty(pod), false))
	k.log("sync    %s: %s", klog.KObj(pod), msg)
	return fmt.Errorf("unmounted volumes of pod %s: %w", klog.KObj(pod), err)
}

// mountFailed starts the waiting message of a volume that cannot be made.
const mountFailed = "MountVolume.SetUp failed: "

func (k *Kubelet) podStatusOrEmpty(pod *v1.Pod) *kubecontainer.PodStatus {
	if ps, err := k.cache.Get(pod.UID); err == nil && ps != nil {
		return ps
	}
	return &kubecontainer.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
}

// tearDownVolumes unmounts and removes a pod's volumes once nothing of it
// runs (SyncTerminatedPod waits for it, WaitForUnmount at kubelet.go:2478).
func (k *Kubelet) tearDownVolumes(uid types.UID) error {
	if k.volumes == nil {
		return nil
	}
	return k.volumes.TearDown(uid)
}

// cleanupPodDirs is cleanupOrphanedPodDirs (kubelet_volumes.go:169) in
// housekeeping: the folder of a pod that the node neither has nor runs
// goes, its volumes torn down first.
func (k *Kubelet) cleanupPodDirs(wanted map[types.UID]bool, running map[types.UID]bool) {
	if k.volumes == nil {
		return
	}
	removed, err := k.volumes.CleanupOrphans(func(uid types.UID) bool {
		return wanted[uid] || running[uid] || k.workers.CouldHaveRunningContainers(uid)
	})
	for _, d := range removed {
		k.log("cleanup removed the folder %s of a pod that is gone", d)
	}
	if err != nil {
		k.log("cleanup pod folders: %v", err)
	}
}

// releaseVolumes ends a graceful node shutdown: the pods are stopped, so
// their volumes are unmounted and their folders removed, as the volume
// manager's reconciler and housekeeping would have done had the node
// kept running — no tmpfs or subPath mount outlives the node. A pod
// with a container still running (its kill failed) keeps its volumes; a
// sandbox alone does not (its stop may have been cut short by the end of
// the shutdown's wait: no container of it can use a volume any more).
func (k *Kubelet) releaseVolumes(ctx context.Context) {
	if k.volumes == nil {
		return
	}
	running, err := k.runtime.GetPods(ctx, false)
	if err != nil {
		k.log("shutdown volumes stay: listing the runtime: %v", err)
		return
	}
	runs := make(map[types.UID]bool, len(running))
	for _, rp := range running {
		for _, c := range rp.Containers {
			if c.State == kubecontainer.ContainerStateRunning {
				runs[rp.ID] = true
			}
		}
	}
	removed, err := k.volumes.CleanupOrphans(func(uid types.UID) bool { return runs[uid] })
	k.log("shutdown removed the folders of %d stopped pod(s) with their volumes", len(removed))
	if err != nil {
		k.log("shutdown volumes: %v", err)
	}
}

// nodeAllocatable reads the node's allocatable from its Node object
// (getNodeAnyWay, kubelet_getters.go): for emptyDir's memory size and the
// environment's resourceFieldRef without a limit.
func nodeAllocatable(c kubernetes.Interface, node string) func() (v1.ResourceList, error) {
	return func() (v1.ResourceList, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n, err := c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return n.Status.Allocatable, nil
	}
}
