package cri

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
	utilexec "k8s.io/utils/exec"
)

// InProcess returns a Client whose calls go straight to a CRI server in the
// same process — the mock runtime of mylib/fakecri — with no socket and no
// gRPC in between. Fleet mode runs a thousand nodes in one process, each
// with its own mock: a socket, a gRPC server and a client connection per
// node would cost file descriptors, goroutines and a protobuf round trip
// per call, and teach nothing more.
//
// The adapter keeps what the kubelet's remote client adds on top of the
// raw calls and what callers rely on: a per-call timeout (twice for
// RunPodSandbox), a non-zero ExecSync exit code as a utilexec.CodeExitError,
// a deadline as remote.ErrCommandTimedOut, and the same checks of required
// response fields (k8s.io/cri-client/pkg/remote_runtime.go, v0.36.3).
// Errors keep their gRPC status codes, so IsNotFound works as over a socket.
// The server must not keep or hand out pointers into its own state — the
// mock copies what it stores and returns.
//
// GetContainerEvents is not offered (the evented PLEG needs a stream; the
// generic PLEG, which relists, is what fleet mode runs). Close is a no-op:
// the caller owns the server.
func InProcess(name string, rs runtimeapi.RuntimeServiceServer, is runtimeapi.ImageServiceServer) *Client {
	c := &Client{Endpoint: "in-process://" + name}
	return c.withServices(&inProcessRuntime{s: rs, timeout: DefaultTimeout}, &inProcessImages{s: is, timeout: DefaultTimeout})
}

type inProcessRuntime struct {
	s       runtimeapi.RuntimeServiceServer
	timeout time.Duration
}

var _ internalapi.RuntimeService = (*inProcessRuntime)(nil)

// call bounds one call by the client's timeout, as the remote client does.
func call[T any](ctx context.Context, d time.Duration, f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return f(ctx)
}

func (r *inProcessRuntime) Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error) {
	return call(ctx, r.timeout, func(ctx context.Context) (*runtimeapi.VersionResponse, error) {
		return r.s.Version(ctx, &runtimeapi.VersionRequest{Version: apiVersion})
	})
}

func (r *inProcessRuntime) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	resp, err := call(ctx, 2*r.timeout, func(ctx context.Context) (*runtimeapi.RunPodSandboxResponse, error) {
		return r.s.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: config, RuntimeHandler: runtimeHandler})
	})
	if err != nil {
		return "", err
	}
	if resp.PodSandboxId == "" {
		return "", fmt.Errorf("PodSandboxId is not set for sandbox %q", config.GetMetadata())
	}
	return resp.PodSandboxId, nil
}

func (r *inProcessRuntime) StopPodSandbox(ctx context.Context, id string) error {
	_, err := call(ctx, r.timeout, func(ctx context.Context) (*runtimeapi.StopPodSandboxResponse, error) {
		return r.s.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
	})
	return err
}

func (r *inProcessRuntime) RemovePodSandbox(ctx context.Context, id string) error {
	_, err := call(ctx, r.timeout, func(ctx context.Context) (*runtimeapi.RemovePodSandboxResponse, error) {
		return r.s.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
	})
	return err
}

func (r *inProcessRuntime) PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	resp, err := call(ctx, r.timeout, func(ctx context.Context) (*runtimeapi.PodSandboxStatusResponse, error) {
		return r.s.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: verbose})
	})
	if err != nil {
		return nil, err
	}
	if st := resp.Status; st != nil {
		if st.Id == "" || st.Metadata == nil || st.Metadata.Name == "" || st.Metadata.Namespace == "" || st.Metadata.Uid == "" {
			return nil, fmt.Errorf("sandbox status of %s lacks its id or metadata", id)
		}
	}
	return resp, nil
}

func (r *inProcessRuntime) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	resp, err := call(ctx, r.timeout, func(ctx context.Context) (*runtimeapi.ListPodSandboxResponse, error) {
		return r.s.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: filter})
	})
	if err != nil {
		return nil, err
	}
	return resp.Items, nil
}

func (r *inProcessRuntime) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	resp, err := call(ctx, r.timeout, func(ctx context.Context) (*runtimeapi.PortForwardResponse, error) {
		return r.s.PortForward(ctx, req)
	})
	if err == nil && resp.Url == "" {
		return nil, errors.New("URL is not set")
	}
	return resp, err
}

func (r *inProcessRuntime) UpdatePodSandboxResources(ctx context.Context, req *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	return call(ctx, r.timeout, func(ctx context.Context) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
		return r.s.UpdatePodSandboxResources(ctx, req)
	})
}

func (r *inProcessRuntime) CreateContainer(ctx context.Context, podID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	resp, err := call(ctx, r.timeout, func(ctx context.Context) (*runtimeapi.CreateContainerResponse, error) {
		return r.s.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podID, Config: config, SandboxConfig: sandboxConfig})
	})
	if err != nil {
		return "", err
	}
	if resp.ContainerId == "" {
		return "", fmt.Errorf("ContainerId is not set for container %q", config.GetMetadata())
	}
	return resp.ContainerId, nil
}

func (r *inProcessRuntime) StartContainer(ctx context.Context, id string) error {
	_, err := call(ctx, r.timeout, func(ctx context.Context) (*runtimeapi.StartContainerResponse, error) {
		return r.s.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
	})
	return err
}

// StopContainer waits up to the grace period plus the client timeout, as
// the remote client does (remote_runtime.go:449).
func (r *inProcessRuntime) StopContainer(ctx context.Context, id string, timeout int64) error {
	_, err := call(ctx, r.timeout+time.Duration(timeout)*time.Second, func(ctx context.Context) (*runtimeapi.StopContainerResponse, error) {
		return r.s.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: timeout})
	})
	return err
}

func (r *inProcessRuntime) RemoveContainer(ctx context.Context, id string) error {
	_, err := call(ctx, r.timeout, func(ctx context.Context) (*runtimeapi.RemoveContainerResponse, error) {
		return r.s.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
	})
	return err
}

func (r *inProcessRuntime) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	resp, err := call(ctx, r.timeout, func(ctx context.Context) (*runtimeapi.ListContainersResponse, error) {
		return r.s.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: filter})
	})
	if err != nil {
		return nil, err
	}
	return resp.Containers, nil
}

func (r *inProcessRuntime) ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	resp, err := call(ctx, r.timeout, func(ctx context.Context) (*runtimeapi.ContainerStatusResponse, error) {
		return r.s.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: verbose})
	})
	if err != nil {
		return nil, err
	}
	if st := resp.Status; st != nil {
		if st.Id == "" || st.Metadata == nil || st.Metadata.Name == "" || st.CreatedAt == 0 {
			return nil, fmt.Errorf("container status of %s lacks its id, metadata or creation time", id)
		}
	}
	return resp, nil
}

func (r *inProcessRuntime) UpdateContainerResources(ctx context.Context, id string, resources *runtimeapi.ContainerResources) error {
	_, err := call(ctx, r.timeout, func(ctx context.Context) (*runtimeapi.UpdateContainerResourcesResponse, error) {
		return r.s.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{
			ContainerId: id, Linux: resources.GetLinux(), Windows: resources.GetWindows()})
	})
	return err
}

// ExecSync: the command's own timeout plus the client's, a deadline is
// remote.ErrCommandTimedOut and a non-zero exit a CodeExitError — the
// kubelet's exec prober tells failure from timeout by these
// (remote_runtime.go:609-657).
func (r *inProcessRuntime) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	var cancel context.CancelFunc
	if timeout != 0 {
		ctx, cancel = context.WithTimeout(ctx, r.timeout+timeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	resp, err := r.s.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: int64(timeout.Seconds())})
	if err != nil {
		if status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: %q timed out after %s", remote.ErrCommandTimedOut, strings.Join(cmd, " "), timeout)
		}
		return nil, nil, err
	}
	if resp.ExitCode != 0 {
		err = utilexec.CodeExitError{
			Err:  fmt.Errorf("command '%s' exited with %d: %s", strings.Join(cmd, " "), resp.ExitCode, resp.Stderr),
			Code: int(resp.ExitCode),
		}
	}
	return resp.Stdout, resp.Stderr, err
}

func (r *inProcessRuntime) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	resp, err := call(ctx, r.timeout, func(ctx context.Context) (*runtimeapi.ExecResponse, error) { return r.s.Exec(ctx, req) })
	if err == nil && resp.Url == "" {
		return nil, errors.New("URL is not set")
	}
	return resp, err
}

func (r *inProcessRuntime) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	resp, err := call(ctx, r.timeout, func(ctx context.Context) (*runtimeapi.AttachResponse, error) { return r.s.Attach(ctx, req) })
	if err == nil && resp.Url == "" {
		return nil, errors.New("URL is not set")
	}
	return resp, err
}

func (r *inProcessRuntime) ReopenContainerLog(ctx context.Context, id string) error {
	_, err := call(ctx, r.timeout, func(ctx context.Context) (*runtimeapi.ReopenContainerLogResponse, error) {
		return r.s.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id})
	})
	return err
}

func (r *inProcessRuntime) CheckpointContainer(ctx context.Context, req *runtimeapi.CheckpointContainerRequest) error {
	_, err := call(ctx, r.timeout, func(ctx context.Context) (*runtimeapi.CheckpointContainerResponse, error) {
		return r.s.CheckpointContainer(ctx, req)
	})
	return err
}

// GetContainerEvents needs a gRPC stream: in process, the generic PLEG's
// relist is the only source of events.
func (r *inProcessRuntime) GetContainerEvents(context.Context, chan *runtimeapi.ContainerEventResponse, func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	return status.Error(codes.Unimplemented, "GetContainerEvents is not offered in process: use the generic PLEG")
}

func (r *inProcessRuntime) ContainerStats(ctx context.Context, id string) (*runtimeapi.ContainerStats, error) {
	resp, err := call(ctx, r.timeout, func(ctx context.Context) (*runtimeapi.ContainerStatsResponse, error) {
		return r.s.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: id})
	})
	if err != nil {
		return nil, err
	}
	return resp.Stats, nil
}

func (r *inProcessRuntime) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	resp, err := call(ctx, r.timeout, func(ctx context.Context) (*runtimeapi.ListContainerStatsResponse, error) {
		return r.s.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: filter})
	})
	if err != nil {
		return nil, err
	}
	return resp.Stats, nil
}

func (r *inProcessRuntime) PodSandboxStats(ctx context.Context, id string) (*runtimeapi.PodSandboxStats, error) {
	resp, err := call(ctx, r.timeout, func(ctx context.Context) (*runtimeapi.PodSandboxStatsResponse, error) {
		return r.s.PodSandboxStats(ctx, &runtimeapi.PodSandboxStatsRequest{PodSandboxId: id})
	})
	if err != nil {
		return nil, err
	}
	return resp.Stats, nil
}

func (r *inProcessRuntime) ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	resp, err := call(ctx, r.timeout, func(ctx context.Context) (*runtimeapi.ListPodSandboxStatsResponse, error) {
		return r.s.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{Filter: filter})
	})
	if err != nil {
		return nil, err
	}
	return resp.Stats, nil
}

func (r *inProcessRuntime) ListMetricDescriptors(ctx context.Context) ([]*runtimeapi.MetricDescriptor, error) {
	resp, err := call(ctx, r.timeout, func(ctx context.Context) (*runtimeapi.ListMetricDescriptorsResponse, error) {
		return r.s.ListMetricDescriptors(ctx, &runtimeapi.ListMetricDescriptorsRequest{})
	})
	if err != nil {
		return nil, err
	}
	return resp.Descriptors, nil
}

func (r *inProcessRuntime) ListPodSandboxMetrics(ctx context.Context) ([]*runtimeapi.PodSandboxMetrics, error) {
	resp, err := call(ctx, r.timeout, func(ctx context.Context) (*runtimeapi.ListPodSandboxMetricsResponse, error) {
		return r.s.ListPodSandboxMetrics(ctx, &runtimeapi.ListPodSandboxMetricsRequest{})
	})
	if err != nil {
		return nil, err
	}
	return resp.PodMetrics, nil
}

func (r *inProcessRuntime) UpdateRuntimeConfig(ctx context.Context, cfg *runtimeapi.RuntimeConfig) error {
	_, err := call(ctx, r.timeout, func(ctx context.Context) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
		return r.s.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: cfg})
	})
	return err
}

func (r *inProcessRuntime) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	resp, err := call(ctx, r.timeout, func(ctx context.Context) (*runtimeapi.StatusResponse, error) {
		return r.s.Status(ctx, &runtimeapi.StatusRequest{Verbose: verbose})
	})
	if err == nil && (resp.Status == nil || len(resp.Status.Conditions) < 2) {
		return nil, errors.New("RuntimeReady or NetworkReady condition are not set")
	}
	return resp, err
}

func (r *inProcessRuntime) RuntimeConfig(ctx context.Context) (*runtimeapi.RuntimeConfigResponse, error) {
	return call(ctx, r.timeout, func(ctx context.Context) (*runtimeapi.RuntimeConfigResponse, error) {
		return r.s.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
	})
}

func (r *inProcessRuntime) Close(context.Context) error { return nil }

type inProcessImages struct {
	s       runtimeapi.ImageServiceServer
	timeout time.Duration
}

var _ internalapi.ImageManagerService = (*inProcessImages)(nil)

func (i *inProcessImages) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	resp, err := call(ctx, i.timeout, func(ctx context.Context) (*runtimeapi.ListImagesResponse, error) {
		return i.s.ListImages(ctx, &runtimeapi.ListImagesRequest{Filter: filter})
	})
	if err != nil {
		return nil, err
	}
	return resp.Images, nil
}

func (i *inProcessImages) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	resp, err := call(ctx, i.timeout, func(ctx context.Context) (*runtimeapi.ImageStatusResponse, error) {
		return i.s.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: image, Verbose: verbose})
	})
	if err != nil {
		return nil, err
	}
	if img := resp.Image; img != nil && (img.Id == "" || img.Size == 0) {
		return nil, fmt.Errorf("image status of %s lacks its id or size", image.GetImage())
	}
	return resp, nil
}

// PullImage has no timeout, as in the remote client: pulls take what they take.
func (i *inProcessImages) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	resp, err := i.s.PullImage(ctx, &runtimeapi.PullImageRequest{Image: image, Auth: auth, SandboxConfig: sandbox})
	if err != nil {
		return "", err
	}
	if resp.ImageRef == "" {
		return "", fmt.Errorf("imageRef of image %q is not set", image.GetImage())
	}
	return resp.ImageRef, nil
}

func (i *inProcessImages) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	_, err := call(ctx, i.timeout, func(ctx context.Context) (*runtimeapi.RemoveImageResponse, error) {
		return i.s.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: image})
	})
	return err
}

func (i *inProcessImages) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return call(ctx, i.timeout, func(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
		return i.s.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	})
}

func (i *inProcessImages) Close(context.Context) error { return nil }
