package cri

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Labels the kubelet puts on every sandbox and container it creates
// (pkg/kubelet/kuberuntime/labels.go, v1.36.3). The kubelet finds its pods
// in the runtime by them; we set them too, so our pods look like its pods.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"
)

// Pod is the part of a v1.Pod the runtime needs for its sandbox.
type Pod struct {
	Name, Namespace, UID string
	// LogDir is the kubelet's --pod-logs-dir (default /var/log/pods); "" means
	// no container logs. The pod's own folder is LogDir/NAMESPACE_NAME_UID.
	LogDir string
	Labels map[string]string
	// HostNetwork: share the node's network namespace, no CNI involved.
	HostNetwork bool
}

// SandboxConfig builds the RunPodSandbox request the way
// generatePodSandboxConfig does (pkg/kubelet/kuberuntime/kuberuntime_sandbox.go, v1.36.3).
func (p Pod) SandboxConfig() *runtimeapi.PodSandboxConfig {
	labels := map[string]string{LabelPodName: p.Name, LabelPodNamespace: p.Namespace, LabelPodUID: p.UID}
	for k, v := range p.Labels {
		labels[k] = v
	}
	cfg := &runtimeapi.PodSandboxConfig{
		// Attempt counts sandbox re-creations of the same pod; the first is 0.
		Metadata: &runtimeapi.PodSandboxMetadata{Name: p.Name, Namespace: p.Namespace, Uid: p.UID, Attempt: 0},
		Labels:   labels,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: p.namespaces()},
		},
	}
	if !p.HostNetwork {
		// With the node's network the runtime must not set a hostname.
		cfg.Hostname = p.Name
	}
	if p.LogDir != "" {
		// BuildPodLogsDirectory in pkg/kubelet/kuberuntime/helpers.go
		cfg.LogDirectory = filepath.Join(p.LogDir, strings.Join([]string{p.Namespace, p.Name, p.UID}, "_"))
	}
	return cfg
}

func (p Pod) namespaces() *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Ipc:     runtimeapi.NamespaceMode_POD,
		// Each container gets its own PID namespace unless the pod sets
		// shareProcessNamespace; then its main process is PID 1 and, like
		// any PID 1, ignores signals it has no handler for.
		Pid: runtimeapi.NamespaceMode_CONTAINER,
	}
	if p.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	return ns
}

// Container is the part of a v1.Container the runtime needs.
type Container struct {
	Name, Image   string
	Command, Args []string
	Env           map[string]string
}

// ContainerConfig builds the CreateContainer request like startContainer's
// generateContainerConfig (kuberuntime_container.go, v1.36.3): the log path
// is relative to the sandbox's LogDirectory, NAME/RESTARTCOUNT.log.
func (p Pod) ContainerConfig(c Container) *runtimeapi.ContainerConfig {
	cfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: 0},
		Image:    &runtimeapi.ImageSpec{Image: c.Image, UserSpecifiedImage: c.Image},
		Command:  c.Command,
		Args:     c.Args,
		Labels: map[string]string{
			LabelPodName: p.Name, LabelPodNamespace: p.Namespace, LabelPodUID: p.UID, LabelContainerName: c.Name,
		},
		Linux: &runtimeapi.LinuxContainerConfig{
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: p.namespaces()},
		},
	}
	if p.LogDir != "" {
		cfg.LogPath = filepath.Join(c.Name, "0.log")
	}
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		cfg.Envs = append(cfg.Envs, &runtimeapi.KeyValue{Key: k, Value: []byte(c.Env[k])})
	}
	return cfg
}

// RunPod starts the pod's sandbox: the pause container holding the pod's
// namespaces, its network set up by CNI. It returns the sandbox ID and the
// config, which CreateContainer needs again.
func (c *Client) RunPod(ctx context.Context, p Pod) (string, *runtimeapi.PodSandboxConfig, error) {
	cfg := p.SandboxConfig()
	if cfg.LogDirectory != "" {
		// The kubelet creates the pod's log folder itself (createPodSandbox).
		if err := os.MkdirAll(cfg.LogDirectory, 0o755); err != nil {
			return "", nil, err
		}
	}
	// "" runtime handler: the runtime's default (runc). A RuntimeClass would name another.
	id, err := c.Runtime.RunPodSandbox(c.ctx(ctx), cfg, "")
	if err != nil {
		return "", nil, fmt.Errorf("RunPodSandbox %s/%s: %w", p.Namespace, p.Name, err)
	}
	return id, cfg, nil
}

// StartContainer creates and starts a container in a sandbox: two CRI calls,
// as in the kubelet's startContainer.
func (c *Client) StartContainer(ctx context.Context, podID string, podCfg *runtimeapi.PodSandboxConfig, cfg *runtimeapi.ContainerConfig) (string, error) {
	ctx = c.ctx(ctx)
	if podCfg.LogDirectory != "" && cfg.LogPath != "" {
		// The kubelet makes NAME/ before CreateContainer; the runtime opens the file.
		if err := os.MkdirAll(filepath.Join(podCfg.LogDirectory, filepath.Dir(cfg.LogPath)), 0o755); err != nil {
			return "", err
		}
	}
	id, err := c.Runtime.CreateContainer(ctx, podID, cfg, podCfg)
	if err != nil {
		return "", fmt.Errorf("CreateContainer %s: %w", cfg.Metadata.Name, err)
	}
	if err := c.Runtime.StartContainer(ctx, id); err != nil {
		return id, fmt.Errorf("StartContainer %s: %w", cfg.Metadata.Name, err)
	}
	return id, nil
}
