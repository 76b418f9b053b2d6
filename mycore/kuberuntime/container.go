package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/events"
	kubekr "k8s.io/kubernetes/pkg/kubelet/kuberuntime"

	"kubelet-labs/mycore/cri"
)

// PodIPs is what a container's environment may refer to besides the pod
// itself: the pod's IPs (from the sandbox) and the node's name and IPs
// (HostIPs; HostIP alone is the same as HostIPs of one).
type PodIPs struct {
	PodIPs   []string
	NodeName string
	HostIP   string
	HostIPs  []string
}

// ContainerConfig is generateContainerConfig (kuberuntime_container.go:343)
// for what our node supports: command and args with $(VAR) expanded, env,
// working dir, the kubelet's labels and annotations, the log file
// NAME/RESTARTCOUNT.log, stdin/tty, the Linux namespaces, the resources
// (resources.go), the security context (security.go; user is the image's,
// for runAsNonRoot) and the mounts of its volumes (volumes.go). env is
// env.go's. Left out: devices. restartCount goes into
// Metadata.Attempt and the annotation, so each restart is a new container
// with a new log file. An error is a container this node will not run as
// asked (StartContainer reports it as CreateContainerConfigError).
func (m *Manager) ContainerConfig(pod *v1.Pod, c *v1.Container, restartCount int, ips PodIPs, user ImageUser) (*runtimeapi.ContainerConfig, error) {
	envs, err := containerEnv(pod, c, ips, m.env)
	if err != nil {
		return nil, err
	}
	sc, err := m.containerSecurity(pod, c, user)
	if err != nil {
		return nil, err
	}
	mounts, err := m.volumeMounts(pod, c, envs)
	if err != nil {
		return nil, err
	}
	command, args := kubecontainer.ExpandContainerCommandAndArgs(c, envs)
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(restartCount)},
		Image:       &runtimeapi.ImageSpec{Image: c.Image, UserSpecifiedImage: c.Image},
		Command:     command,
		Args:        args,
		WorkingDir:  c.WorkingDir,
		Labels:      withLabels(containerLabels(c, pod), m.labels),
		Annotations: containerAnnotations(c, pod, restartCount),
		// buildContainerLogsPath (helpers.go): relative to the sandbox's LogDirectory
		LogPath:   filepath.Join(c.Name, strconv.Itoa(restartCount)+".log"),
		Stdin:     c.Stdin,
		StdinOnce: c.StdinOnce,
		Tty:       c.TTY,
		Mounts:    mounts,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources:       m.containerResources(pod, c),
			SecurityContext: sc,
		},
	}
	for _, e := range envs {
		cfg.Envs = append(cfg.Envs, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)})
	}
	return cfg, nil
}

// configError is a container the kubelet could not configure: the sync
// result says CreateContainerConfigError, as upstream's startContainer does
// (kuberuntime_container.go:254-262), not RunContainerError — the runtime
// was never asked.
type configError struct{ error }

func (e configError) Unwrap() error { return e.error }

// IsConfigError reports whether StartContainer refused the container before
// asking the runtime (unsupported env or securityContext, runAsNonRoot).
func IsConfigError(err error) bool {
	var c configError
	return errors.As(err, &c)
}

// StartContainer is startContainer (kuberuntime_container.go:200): make
// sure the image is there, count the restart, create, start, run the
// postStart hook (hooks.go), with the kubelet's events on the way.
// The restart count is the last instance's plus one (:222-227): the
// runtime's annotations remember it, not the kubelet.
func (m *Manager) StartContainer(ctx context.Context, sandboxID string, sandboxCfg *runtimeapi.PodSandboxConfig, pod *v1.Pod, c *v1.Container, podStatus *kubecontainer.PodStatus, ips PodIPs) (string, error) {
	if err := m.ensureContainerImage(ctx, pod, c); err != nil {
		return "", err
	}
	restartCount := 0
	if last := podStatus.FindContainerStatusByName(c.Name); last != nil {
		restartCount = last.RestartCount + 1
	}
	user, err := m.imageUser(ctx, podAbout(pod).of(c.Name), c.Image)
	if err != nil {
		return "", configError{err}
	}
	cfg, err := m.ContainerConfig(pod, c, restartCount, ips, user)
	if err == nil {
		err = m.addNodeMounts(pod, c, cfg, ips) // hosts.go, termination.go
	}
	if err == nil {
		err = targetNamespace(pod, c, podStatus, cfg) // ephemeral.go
	}
	if err != nil {
		m.recordContainerEvent(pod, c, "", v1.EventTypeWarning, events.FailedToCreateContainer, "Error: %v", err)
		return "", configError{err}
	}
	// The runtime opens the log file; the kubelet makes its folder (:361).
	logDir := kubekr.BuildContainerLogsDirectory(m.podLogsDir, pod.Namespace, pod.Name, pod.UID, c.Name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return "", fmt.Errorf("container log folder: %w", err)
	}
	on := podAbout(pod).of(c.Name)
	id, err := m.cri.CreateContainer(ctx, on, sandboxID, cfg, sandboxCfg)
	if err != nil {
		m.recordContainerEvent(pod, c, id, v1.EventTypeWarning, events.FailedToCreateContainer, "Error: %v", grpcMessage(err))
		return "", fmt.Errorf("CreateContainer %s: %w", c.Name, err)
	}
	m.recordContainerEvent(pod, c, id, v1.EventTypeNormal, events.CreatedContainer, "Container created")
	// The pair's line, as the kubelet's startContainer makes the two calls
	// for one step.
	on = on.saying("CRI CreateContainer + StartContainer %s/%s %s (restartCount %d) → %s", pod.Name, c.Name, c.Image, restartCount, cri.ShortID(id))
	if err := m.cri.StartContainer(ctx, on, id); err != nil {
		m.recordContainerEvent(pod, c, id, v1.EventTypeWarning, events.FailedToStartContainer, "Error: %v", grpcMessage(err))
		return id, fmt.Errorf("StartContainer %s: %w", c.Name, err)
	}
	m.recordContainerEvent(pod, c, id, v1.EventTypeNormal, events.StartedContainer, "Container started")
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		return id, m.runPostStart(ctx, pod, c, id)
	}
	return id, nil
}

// hasImage reports whether the runtime has image (ImageStatus).
func (m *Manager) hasImage(ctx context.Context, a about, image string) (bool, error) {
	img, err := m.cri.ImageStatus(ctx, a, image)
	return img != nil, err
}
