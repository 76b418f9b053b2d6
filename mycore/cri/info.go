package cri

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Info is what the kubelet learns about its runtime before it runs pods.
type Info struct {
	RuntimeName    string // "containerd"
	RuntimeVersion string // "1.6.20~ds1"
	APIVersion     string // the CRI version the runtime speaks: "v1"
	// Conditions: the kubelet needs RuntimeReady and NetworkReady to be true
	// before it reports the node Ready (updateRuntimeUp, pkg/kubelet/kubelet.go).
	Conditions []*runtimeapi.RuntimeCondition
}

// Info calls Version and Status, like kubeGenericRuntimeManager.Version and
// .Status (pkg/kubelet/kuberuntime/kuberuntime_manager.go, v1.36.3).
func (c *Client) Info(ctx context.Context) (*Info, error) {
	ctx = c.ctx(ctx)
	// The kubelet passes its own CRI version; runtimes ignore it today.
	v, err := c.Runtime.Version(ctx, "v1")
	if err != nil {
		return nil, fmt.Errorf("CRI Version: %w", err)
	}
	st, err := c.Runtime.Status(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("CRI Status: %w", err)
	}
	info := &Info{RuntimeName: v.RuntimeName, RuntimeVersion: v.RuntimeVersion, APIVersion: v.RuntimeApiVersion}
	if st.Status != nil {
		info.Conditions = st.Status.Conditions
	}
	return info, nil
}

// Ready reports whether condition typ (runtimeapi.RuntimeReady or
// runtimeapi.NetworkReady) is true.
func (i *Info) Ready(typ string) bool {
	for _, c := range i.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return false
}

// Pods lists pod sandboxes; labels, if given, must all match.
func (c *Client) Pods(ctx context.Context, labels map[string]string) ([]*runtimeapi.PodSandbox, error) {
	var f *runtimeapi.PodSandboxFilter
	if len(labels) > 0 {
		f = &runtimeapi.PodSandboxFilter{LabelSelector: labels}
	}
	return c.Runtime.ListPodSandbox(c.ctx(ctx), f)
}

// Containers lists containers, of one sandbox if podID is not "".
func (c *Client) Containers(ctx context.Context, podID string) ([]*runtimeapi.Container, error) {
	var f *runtimeapi.ContainerFilter
	if podID != "" {
		f = &runtimeapi.ContainerFilter{PodSandboxId: podID}
	}
	return c.Runtime.ListContainers(c.ctx(ctx), f)
}

// ImageList lists the images the runtime has.
func (c *Client) ImageList(ctx context.Context) ([]*runtimeapi.Image, error) {
	return c.Images.ListImages(c.ctx(ctx), nil)
}

// HasImage reports whether the runtime has image (by name or ID).
func (c *Client) HasImage(ctx context.Context, image string) (bool, error) {
	st, err := c.Images.ImageStatus(c.ctx(ctx), &runtimeapi.ImageSpec{Image: image}, false)
	if err != nil {
		return false, err
	}
	return st.GetImage() != nil, nil
}

// PodStatus returns the runtime's view of one sandbox, including the pod IP
// the runtime got from CNI (Network.Ip).
func (c *Client) PodStatus(ctx context.Context, podID string) (*runtimeapi.PodSandboxStatus, error) {
	resp, err := c.Runtime.PodSandboxStatus(c.ctx(ctx), podID, false)
	if err != nil {
		return nil, err
	}
	return resp.GetStatus(), nil
}
