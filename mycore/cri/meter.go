package cri

import (
	"context"
	"sync/atomic"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Meter counts every CRI call made through a Client: per method, how many,
// how many failed, and the time they took together. Dial and InProcess put
// it between the Client's users and the runtime, so whoever calls — the
// runtime manager, the PLEG's relists, the node status's Version, the
// streaming server, log rotation — is counted, and no call can go around
// it. Upstream does the same once for all of the kubelet:
// newInstrumentedRuntimeService and newInstrumentedImageManagerService
// (pkg/kubelet/kuberuntime/instrumented_services.go:35-61 at v1.36.3) wrap
// both services and record each operation's count, latency and errors
// (metrics.RuntimeOperations, RuntimeOperationsDuration,
// RuntimeOperationsErrors).
//
// The counters are fixed and atomic — no lock, no map — because fleet mode
// runs a thousand nodes in one process, each with its own Client.
type Meter struct {
	ops [numMethods]methodCount
}

type methodCount struct {
	calls, failed atomic.Uint64
	nanos         atomic.Int64
}

// CallCount is one CRI method's calls so far.
type CallCount struct {
	Method string
	Calls  uint64
	Failed uint64
	// Took is the time all Calls took together.
	Took time.Duration
}

// Counts returns each method called at least once, in the order of the
// CRI's services (runtime, then images).
func (m *Meter) Counts() []CallCount {
	if m == nil {
		return nil
	}
	var out []CallCount
	for i := range m.ops {
		c := &m.ops[i]
		if n := c.calls.Load(); n > 0 {
			out = append(out, CallCount{Method: methodNames[i], Calls: n, Failed: c.failed.Load(), Took: time.Duration(c.nanos.Load())})
		}
	}
	return out
}

// Total is the number of calls of every method so far.
func (m *Meter) Total() uint64 {
	if m == nil {
		return 0
	}
	var n uint64
	for i := range m.ops {
		n += m.ops[i].calls.Load()
	}
	return n
}

// observe records one call of method that began at start; deferred with
// a pointer to the call's error, it sees how the call ended.
func (m *Meter) observe(method criMethod, start time.Time, err *error) {
	c := &m.ops[method]
	c.calls.Add(1)
	c.nanos.Add(int64(time.Since(start)))
	if *err != nil {
		c.failed.Add(1)
	}
}

// criMethod indexes Meter.ops.
type criMethod int

const (
	mVersion criMethod = iota
	mStatus
	mRuntimeConfig
	mUpdateRuntimeConfig
	mRunPodSandbox
	mStopPodSandbox
	mRemovePodSandbox
	mPodSandboxStatus
	mListPodSandbox
	mUpdatePodSandboxResources
	mPortForward
	mCreateContainer
	mStartContainer
	mStopContainer
	mRemoveContainer
	mListContainers
	mContainerStatus
	mUpdateContainerResources
	mReopenContainerLog
	mExecSync
	mExec
	mAttach
	mCheckpointContainer
	mGetContainerEvents
	mContainerStats
	mListContainerStats
	mPodSandboxStats
	mListPodSandboxStats
	mListMetricDescriptors
	mListPodSandboxMetrics
	mListImages
	mImageStatus
	mPullImage
	mRemoveImage
	mImageFsInfo
	numMethods
)

// methodNames are the CRI's gRPC method names (api.proto), the names the
// journal and crictl use.
var methodNames = [numMethods]string{
	"Version", "Status", "RuntimeConfig", "UpdateRuntimeConfig",
	"RunPodSandbox", "StopPodSandbox", "RemovePodSandbox", "PodSandboxStatus", "ListPodSandbox", "UpdatePodSandboxResources", "PortForward",
	"CreateContainer", "StartContainer", "StopContainer", "RemoveContainer", "ListContainers", "ContainerStatus", "UpdateContainerResources", "ReopenContainerLog",
	"ExecSync", "Exec", "Attach", "CheckpointContainer", "GetContainerEvents",
	"ContainerStats", "ListContainerStats", "PodSandboxStats", "ListPodSandboxStats", "ListMetricDescriptors", "ListPodSandboxMetrics",
	"ListImages", "ImageStatus", "PullImage", "RemoveImage", "ImageFsInfo",
}

// metered is the Client's RuntimeService: rs, every call counted.
type metered struct {
	rs internalapi.RuntimeService
	m  *Meter
}

var _ internalapi.RuntimeService = metered{}

func (r metered) Version(ctx context.Context, apiVersion string) (_ *runtimeapi.VersionResponse, err error) {
	defer r.m.observe(mVersion, time.Now(), &err)
	return r.rs.Version(ctx, apiVersion)
}

func (r metered) Status(ctx context.Context, verbose bool) (_ *runtimeapi.StatusResponse, err error) {
	defer r.m.observe(mStatus, time.Now(), &err)
	return r.rs.Status(ctx, verbose)
}

func (r metered) RuntimeConfig(ctx context.Context) (_ *runtimeapi.RuntimeConfigResponse, err error) {
	defer r.m.observe(mRuntimeConfig, time.Now(), &err)
	return r.rs.RuntimeConfig(ctx)
}

func (r metered) UpdateRuntimeConfig(ctx context.Context, cfg *runtimeapi.RuntimeConfig) (err error) {
	defer r.m.observe(mUpdateRuntimeConfig, time.Now(), &err)
	return r.rs.UpdateRuntimeConfig(ctx, cfg)
}

func (r metered) RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (_ string, err error) {
	defer r.m.observe(mRunPodSandbox, time.Now(), &err)
	return r.rs.RunPodSandbox(ctx, cfg, handler)
}

func (r metered) StopPodSandbox(ctx context.Context, id string) (err error) {
	defer r.m.observe(mStopPodSandbox, time.Now(), &err)
	return r.rs.StopPodSandbox(ctx, id)
}

func (r metered) RemovePodSandbox(ctx context.Context, id string) (err error) {
	defer r.m.observe(mRemovePodSandbox, time.Now(), &err)
	return r.rs.RemovePodSandbox(ctx, id)
}

func (r metered) PodSandboxStatus(ctx context.Context, id string, verbose bool) (_ *runtimeapi.PodSandboxStatusResponse, err error) {
	defer r.m.observe(mPodSandboxStatus, time.Now(), &err)
	return r.rs.PodSandboxStatus(ctx, id, verbose)
}

func (r metered) ListPodSandbox(ctx context.Context, f *runtimeapi.PodSandboxFilter) (_ []*runtimeapi.PodSandbox, err error) {
	defer r.m.observe(mListPodSandbox, time.Now(), &err)
	return r.rs.ListPodSandbox(ctx, f)
}

func (r metered) UpdatePodSandboxResources(ctx context.Context, req *runtimeapi.UpdatePodSandboxResourcesRequest) (_ *runtimeapi.UpdatePodSandboxResourcesResponse, err error) {
	defer r.m.observe(mUpdatePodSandboxResources, time.Now(), &err)
	return r.rs.UpdatePodSandboxResources(ctx, req)
}

func (r metered) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (_ *runtimeapi.PortForwardResponse, err error) {
	defer r.m.observe(mPortForward, time.Now(), &err)
	return r.rs.PortForward(ctx, req)
}

func (r metered) CreateContainer(ctx context.Context, podID string, cfg *runtimeapi.ContainerConfig, podCfg *runtimeapi.PodSandboxConfig) (_ string, err error) {
	defer r.m.observe(mCreateContainer, time.Now(), &err)
	return r.rs.CreateContainer(ctx, podID, cfg, podCfg)
}

func (r metered) StartContainer(ctx context.Context, id string) (err error) {
	defer r.m.observe(mStartContainer, time.Now(), &err)
	return r.rs.StartContainer(ctx, id)
}

func (r metered) StopContainer(ctx context.Context, id string, timeout int64) (err error) {
	defer r.m.observe(mStopContainer, time.Now(), &err)
	return r.rs.StopContainer(ctx, id, timeout)
}

func (r metered) RemoveContainer(ctx context.Context, id string) (err error) {
	defer r.m.observe(mRemoveContainer, time.Now(), &err)
	return r.rs.RemoveContainer(ctx, id)
}

func (r metered) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) (_ []*runtimeapi.Container, err error) {
	defer r.m.observe(mListContainers, time.Now(), &err)
	return r.rs.ListContainers(ctx, f)
}

func (r metered) ContainerStatus(ctx context.Context, id string, verbose bool) (_ *runtimeapi.ContainerStatusResponse, err error) {
	defer r.m.observe(mContainerStatus, time.Now(), &err)
	return r.rs.ContainerStatus(ctx, id, verbose)
}

func (r metered) UpdateContainerResources(ctx context.Context, id string, res *runtimeapi.ContainerResources) (err error) {
	defer r.m.observe(mUpdateContainerResources, time.Now(), &err)
	return r.rs.UpdateContainerResources(ctx, id, res)
}

func (r metered) ReopenContainerLog(ctx context.Context, id string) (err error) {
	defer r.m.observe(mReopenContainerLog, time.Now(), &err)
	return r.rs.ReopenContainerLog(ctx, id)
}

func (r metered) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (_, _ []byte, err error) {
	defer r.m.observe(mExecSync, time.Now(), &err)
	return r.rs.ExecSync(ctx, id, cmd, timeout)
}

func (r metered) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (_ *runtimeapi.ExecResponse, err error) {
	defer r.m.observe(mExec, time.Now(), &err)
	return r.rs.Exec(ctx, req)
}

func (r metered) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (_ *runtimeapi.AttachResponse, err error) {
	defer r.m.observe(mAttach, time.Now(), &err)
	return r.rs.Attach(ctx, req)
}

func (r metered) CheckpointContainer(ctx context.Context, req *runtimeapi.CheckpointContainerRequest) (err error) {
	defer r.m.observe(mCheckpointContainer, time.Now(), &err)
	return r.rs.CheckpointContainer(ctx, req)
}

func (r metered) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, established func(runtimeapi.RuntimeService_GetContainerEventsClient)) (err error) {
	defer r.m.observe(mGetContainerEvents, time.Now(), &err)
	return r.rs.GetContainerEvents(ctx, ch, established)
}

func (r metered) ContainerStats(ctx context.Context, id string) (_ *runtimeapi.ContainerStats, err error) {
	defer r.m.observe(mContainerStats, time.Now(), &err)
	return r.rs.ContainerStats(ctx, id)
}

func (r metered) ListContainerStats(ctx context.Context, f *runtimeapi.ContainerStatsFilter) (_ []*runtimeapi.ContainerStats, err error) {
	defer r.m.observe(mListContainerStats, time.Now(), &err)
	return r.rs.ListContainerStats(ctx, f)
}

func (r metered) PodSandboxStats(ctx context.Context, id string) (_ *runtimeapi.PodSandboxStats, err error) {
	defer r.m.observe(mPodSandboxStats, time.Now(), &err)
	return r.rs.PodSandboxStats(ctx, id)
}

func (r metered) ListPodSandboxStats(ctx context.Context, f *runtimeapi.PodSandboxStatsFilter) (_ []*runtimeapi.PodSandboxStats, err error) {
	defer r.m.observe(mListPodSandboxStats, time.Now(), &err)
	return r.rs.ListPodSandboxStats(ctx, f)
}

func (r metered) ListMetricDescriptors(ctx context.Context) (_ []*runtimeapi.MetricDescriptor, err error) {
	defer r.m.observe(mListMetricDescriptors, time.Now(), &err)
	return r.rs.ListMetricDescriptors(ctx)
}

func (r metered) ListPodSandboxMetrics(ctx context.Context) (_ []*runtimeapi.PodSandboxMetrics, err error) {
	defer r.m.observe(mListPodSandboxMetrics, time.Now(), &err)
	return r.rs.ListPodSandboxMetrics(ctx)
}

// Close is not a CRI call: it closes the connection.
func (r metered) Close(ctx context.Context) error { return r.rs.Close(ctx) }

// meteredImages is the Client's ImageManagerService, every call counted.
type meteredImages struct {
	is internalapi.ImageManagerService
	m  *Meter
}

var _ internalapi.ImageManagerService = meteredImages{}

func (i meteredImages) ListImages(ctx context.Context, f *runtimeapi.ImageFilter) (_ []*runtimeapi.Image, err error) {
	defer i.m.observe(mListImages, time.Now(), &err)
	return i.is.ListImages(ctx, f)
}

func (i meteredImages) ImageStatus(ctx context.Context, img *runtimeapi.ImageSpec, verbose bool) (_ *runtimeapi.ImageStatusResponse, err error) {
	defer i.m.observe(mImageStatus, time.Now(), &err)
	return i.is.ImageStatus(ctx, img, verbose)
}

func (i meteredImages) PullImage(ctx context.Context, img *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, podCfg *runtimeapi.PodSandboxConfig) (_ string, err error) {
	defer i.m.observe(mPullImage, time.Now(), &err)
	return i.is.PullImage(ctx, img, auth, podCfg)
}

func (i meteredImages) RemoveImage(ctx context.Context, img *runtimeapi.ImageSpec) (err error) {
	defer i.m.observe(mRemoveImage, time.Now(), &err)
	return i.is.RemoveImage(ctx, img)
}

func (i meteredImages) ImageFsInfo(ctx context.Context) (_ *runtimeapi.ImageFsInfoResponse, err error) {
	defer i.m.observe(mImageFsInfo, time.Now(), &err)
	return i.is.ImageFsInfo(ctx)
}

// Close is not a CRI call: it closes the connection.
func (i meteredImages) Close(ctx context.Context) error { return i.is.Close(ctx) }
