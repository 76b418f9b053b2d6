package cri

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// IsNotFound reports a CRI NotFound error. containerd 1.6 returns NotFound
// for Stop/Remove of an object that is already gone; newer runtimes (and the
// CRI spec) return success. The kubelet treats both as done, so do we.
func IsNotFound(err error) bool { return status.Code(err) == codes.NotFound }

func ignoreNotFound(err error) error {
	if IsNotFound(err) {
		return nil
	}
	return err
}

// StopContainer asks the runtime to stop a container: SIGTERM (or the
// image's STOPSIGNAL), then SIGKILL after grace. Whole seconds only: CRI's
// timeout is an int64 of seconds (killContainer in kuberuntime_container.go
// rounds the pod's grace period the same way).
func (c *Client) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	err := c.Runtime.StopContainer(c.ctx(ctx), id, int64(grace/time.Second))
	return ignoreNotFound(err)
}

// RemoveContainer deletes a stopped container (and its writable layer).
func (c *Client) RemoveContainer(ctx context.Context, id string) error {
	return ignoreNotFound(c.Runtime.RemoveContainer(c.ctx(ctx), id))
}

// RemovePod tears a pod down in the kubelet's order (killPodWithSyncResult,
// kuberuntime_manager.go): stop the containers, then stop the sandbox (which
// tears down its network), then remove everything. An already gone pod is
// not an error.
func (c *Client) RemovePod(ctx context.Context, podID string, grace time.Duration) error {
	ctx = c.ctx(ctx)
	ctrs, err := c.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: podID})
	if err != nil {
		return fmt.Errorf("list containers of %s: %w", podID, err)
	}
	var errs []error
	for _, ct := range ctrs {
		if ct.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			errs = append(errs, c.StopContainer(ctx, ct.Id, grace))
		}
	}
	if err := ignoreNotFound(c.Runtime.StopPodSandbox(ctx, podID)); err != nil {
		errs = append(errs, fmt.Errorf("StopPodSandbox: %w", err))
	}
	var logs []string
	for _, ct := range ctrs {
		if st, err := c.ContainerStatus(ctx, ct.Id); err == nil && st.LogPath != "" {
			logs = append(logs, st.LogPath)
		}
		errs = append(errs, c.RemoveContainer(ctx, ct.Id))
	}
	if err := ignoreNotFound(c.Runtime.RemovePodSandbox(ctx, podID)); err != nil {
		errs = append(errs, fmt.Errorf("RemovePodSandbox: %w", err))
	}
	removeLogs(logs)
	return errors.Join(errs...)
}

// removeLogs deletes container log files, then their folders if empty
// (NAME/ and the pod's NAMESPACE_NAME_UID/). The runtime writes the files
// but never deletes them: the kubelet does, in removeContainerLog
// (kuberuntime_container.go) and its pod log GC (kuberuntime_gc.go).
func removeLogs(paths []string) {
	for _, p := range paths {
		_ = os.Remove(p)
		_ = os.Remove(filepath.Dir(p))
		_ = os.Remove(filepath.Dir(filepath.Dir(p)))
	}
}

// ContainerStatus returns the runtime's view of one container.
func (c *Client) ContainerStatus(ctx context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	resp, err := c.Runtime.ContainerStatus(c.ctx(ctx), id, false)
	if err != nil {
		return nil, err
	}
	return resp.GetStatus(), nil
}

// WaitContainerState polls until the container is in state want (the
// kubelet polls too: PLEG relists every second) or ctx ends.
func (c *Client) WaitContainerState(ctx context.Context, id string, want runtimeapi.ContainerState, every time.Duration) (*runtimeapi.ContainerStatus, error) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		st, err := c.ContainerStatus(ctx, id)
		if err != nil {
			return nil, err
		}
		if st.State == want {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("container %.12s is %s, not %s: %w", id, st.State, want, ctx.Err())
		case <-t.C:
		}
	}
}
