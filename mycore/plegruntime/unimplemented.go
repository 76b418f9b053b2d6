package plegruntime

import (
	"context"
	"fmt"
	"io"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/kubernetes/pkg/credentialprovider"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubelettypes "k8s.io/kubernetes/pkg/kubelet/types"
)

// The rest of kubecontainer.Runtime: what kuberuntime does to change the
// node (sync, kill, pull, GC, logs...). The PLEG never calls these; labs
// 15-17 write the ones they teach (SyncPod, KillPod, GC) in
// mycore/kuberuntime, on top of mycore/cri. Each returns an error that
// names the method and says where the real one is, for whoever hands this
// runtime to code that changes pods.

func notImplemented(method string) error {
	return fmt.Errorf("kubecontainer.Runtime.%s: %w (mycore/plegruntime is the runtime as the PLEG reads it: GetPods, GetPod, GetPodStatus; pods are started and stopped by mycore/kuberuntime.Manager)", method, ErrNotImplemented)
}

// SyncPod is not implemented; PodSyncResult carries the error.
func (r *Runtime) SyncPod(context.Context, *v1.Pod, *kubecontainer.PodStatus, []v1.Secret, *flowcontrol.Backoff, bool) kubecontainer.PodSyncResult {
	return kubecontainer.PodSyncResult{SyncError: notImplemented("SyncPod")}
}

func (r *Runtime) KillPod(context.Context, *v1.Pod, kubecontainer.Pod, *int64) error {
	return notImplemented("KillPod")
}

func (r *Runtime) GarbageCollect(context.Context, kubecontainer.GCPolicy, bool, bool) error {
	return notImplemented("GarbageCollect")
}

func (r *Runtime) GetContainerLogs(context.Context, *v1.Pod, kubecontainer.ContainerID, *v1.PodLogOptions, io.Writer, io.Writer) error {
	return notImplemented("GetContainerLogs")
}

func (r *Runtime) DeleteContainer(context.Context, kubecontainer.ContainerID) error {
	return notImplemented("DeleteContainer")
}

func (r *Runtime) PullImage(context.Context, kubecontainer.ImageSpec, []credentialprovider.TrackedAuthConfig, *runtimeapi.PodSandboxConfig) (string, *credentialprovider.TrackedAuthConfig, error) {
	return "", nil, notImplemented("PullImage")
}

func (r *Runtime) GetImageRef(context.Context, kubecontainer.ImageSpec) (string, error) {
	return "", notImplemented("GetImageRef")
}

func (r *Runtime) ListImages(context.Context) ([]kubecontainer.Image, error) {
	return nil, notImplemented("ListImages")
}

func (r *Runtime) RemoveImage(context.Context, kubecontainer.ImageSpec) error {
	return notImplemented("RemoveImage")
}

func (r *Runtime) ImageStats(context.Context) (*kubecontainer.ImageStats, error) {
	return nil, notImplemented("ImageStats")
}

func (r *Runtime) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return nil, notImplemented("ImageFsInfo")
}

func (r *Runtime) GetImageSize(context.Context, kubecontainer.ImageSpec) (uint64, error) {
	return 0, notImplemented("GetImageSize")
}

func (r *Runtime) UpdatePodCIDR(context.Context, string) error {
	return notImplemented("UpdatePodCIDR")
}

func (r *Runtime) CheckpointContainer(context.Context, *runtimeapi.CheckpointContainerRequest) error {
	return notImplemented("CheckpointContainer")
}

func (r *Runtime) ListMetricDescriptors(context.Context) ([]*runtimeapi.MetricDescriptor, error) {
	return nil, notImplemented("ListMetricDescriptors")
}

func (r *Runtime) ListPodSandboxMetrics(context.Context) ([]*runtimeapi.PodSandboxMetrics, error) {
	return nil, notImplemented("ListPodSandboxMetrics")
}

func (r *Runtime) UpdateActuatedPodLevelResources(*v1.Pod) error {
	return notImplemented("UpdateActuatedPodLevelResources")
}

// GetContainerSwapBehavior: no swap on a lab node.
func (r *Runtime) GetContainerSwapBehavior(*v1.Pod, *v1.Container) kubelettypes.SwapBehavior {
	return kubelettypes.NoSwap
}

// IsPodResizeInProgress: not asked here; our kubelet asks the runtime
// manager (kuberuntime.Manager.ResizeInProgress), which resizes.
func (r *Runtime) IsPodResizeInProgress(*v1.Pod, *kubecontainer.PodStatus) bool { return false }
