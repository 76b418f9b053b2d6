// Package labpod is what the stop and kill labs (15, 16) share: a runtime
// to run one pod on — the mock CRI in the lab's own process, or the
// course's containerd — and that pod's object in the real apiserver, for
// which the lab plays the kubelet of a node that has no other kubelet.
package labpod

import (
	"context"
	"fmt"
	"path/filepath"

	"kubelet-labs/internal/state"
	"kubelet-labs/mycore/cri"
	"kubelet-labs/mylib/fakecri"
)

// The runtimes a lab can run on.
const (
	Mock       = "mock"
	Containerd = "containerd"
)

// The images the course's containerd has (scripts/containerd-up.sh); the
// mock is given the same names, so one manifest serves both runtimes.
const (
	mockPauseImage   = "localhost/kubelet-labs/pause:1.0"
	mockBusyboxImage = "localhost/kubelet-labs/busybox:1.35.0"
)

// Runtime is an open CRI runtime.
type Runtime struct {
	Kind       string // Mock or Containerd
	CRI        *cri.Client
	Version    string // "containerd 1.6.20~ds1", "fakecri 0.1.0"
	PodLogsDir string // the kubelet's --pod-logs-dir for this runtime
	Image      string // the busybox image the runtime has
	close      []func()
}

// RuntimeOptions choose and find the runtime.
type RuntimeOptions struct {
	Kind       string // Mock (default) or Containerd
	Endpoint   string // Containerd: default from the state folder's containerd/env
	PodLogsDir string // default: the state folder's <Lab>/pod-logs (mock), containerd's POD_LOG_DIR
	Image      string // Containerd: its busybox image (default: BUSYBOX_IMAGE of its env file)
	Lab        string // the lab's folder name, for its files in the state folder
}

// OpenRuntime starts the mock in this process (on a socket in the state
// folder's <Lab>/), or dials containerd and checks that its pod network is
// ready. Close releases it.
func OpenRuntime(ctx context.Context, o RuntimeOptions) (*Runtime, error) {
	r := &Runtime{Kind: o.Kind, PodLogsDir: o.PodLogsDir}
	switch o.Kind {
	case Mock, "":
		r.Kind = Mock
		dir, err := state.Ensure(o.Lab)
		if err != nil {
			return nil, err
		}
		srv, err := fakecri.Start(filepath.Join(dir, "mockcri.sock"),
			fakecri.WithPauseImage(mockPauseImage), fakecri.WithImages(mockBusyboxImage))
		if err != nil {
			return nil, fmt.Errorf("start the mock CRI: %w", err)
		}
		r.close = append(r.close, srv.Stop)
		o.Endpoint, r.Image = srv.Endpoint(), mockBusyboxImage
		if r.PodLogsDir == "" {
			r.PodLogsDir = filepath.Join(dir, "pod-logs")
		}
	case Containerd:
		env, err := cri.Load()
		if err != nil {
			return nil, err
		}
		if o.Endpoint == "" {
			o.Endpoint = env.Endpoint
		}
		if r.PodLogsDir == "" {
			r.PodLogsDir = env.PodLogDir
		}
		r.Image = o.Image
		if r.Image == "" {
			r.Image = env.BusyboxImage
		}
		if r.Image == "" {
			r.Image = mockBusyboxImage
		}
	default:
		return nil, fmt.Errorf("--runtime %q: want %s or %s", o.Kind, Mock, Containerd)
	}
	c, err := cri.Dial(ctx, o.Endpoint)
	if err != nil {
		r.Close()
		return nil, err
	}
	r.CRI = c
	r.close = append([]func(){func() { _ = c.Close() }}, r.close...)
	info, err := c.Info(ctx)
	if err != nil {
		r.Close()
		return nil, err
	}
	r.Version = info.RuntimeName + " " + info.RuntimeVersion
	if !info.Ready("NetworkReady") {
		r.Close()
		return nil, fmt.Errorf("%s on %s is up but its pod network is not ready (no CNI config?): restart it with %s", r.Version, c.Endpoint, cri.UpHint)
	}
	ok, err := c.HasImage(ctx, r.Image)
	if err != nil {
		r.Close()
		return nil, err
	}
	if !ok {
		r.Close()
		return nil, fmt.Errorf("%s has no image %s: run %s, which imports it", r.Version, r.Image, cri.UpHint)
	}
	return r, nil
}

// Close closes the client, then stops the mock if it is ours.
func (r *Runtime) Close() {
	for _, f := range r.close {
		f()
	}
	r.close = nil
}
