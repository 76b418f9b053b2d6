package fakecri

import (
	"context"
	"maps"
	"path/filepath"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// AnnotationIgnoreSIGTERM marks a container whose process ignores SIGTERM.
// On a container config: "true". On a sandbox (i.e. a pod annotation):
// "true" or "*" for every container, or a comma-separated list of names.
const AnnotationIgnoreSIGTERM = "fakecri.kubelet-labs/ignore-sigterm"

// sandbox is the runtime's record of a pod sandbox. Everything is guarded
// by Runtime.mu; config is a private deep copy and never changes: list items
// share its label and annotation maps (doc.go).
type sandbox struct {
	id         string
	seq        uint64 // creation order: lists are oldest first even if clocks tie
	config     *runtimeapi.PodSandboxConfig
	handler    string
	state      runtimeapi.PodSandboxState
	createdAt  int64
	ip         string // "" for host-network sandboxes
	pid        int
	nameKey    string
	containers map[string]*container
	resources  *runtimeapi.LinuxContainerResources // UpdatePodSandboxResources
}

func (sb *sandbox) hostNetwork() bool {
	return sb.config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
}

func (sb *sandbox) hostname() string {
	if h := sb.config.GetHostname(); h != "" {
		return h
	}
	return sb.config.GetMetadata().GetName()
}

func (sb *sandbox) status() *runtimeapi.PodSandboxStatus {
	return &runtimeapi.PodSandboxStatus{
		Id:             sb.id,
		Metadata:       sb.metadata(),
		State:          sb.state,
		CreatedAt:      sb.createdAt,
		Labels:         maps.Clone(sb.config.GetLabels()),
		Annotations:    maps.Clone(sb.config.GetAnnotations()),
		RuntimeHandler: sb.handler,
		Network:        &runtimeapi.PodSandboxNetworkStatus{Ip: sb.ip},
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{
			Options: cloneNamespaceOptions(sb.config.GetLinux().GetSecurityContext().GetNamespaceOptions()),
		}},
	}
}

func (sb *sandbox) metadata() *runtimeapi.PodSandboxMetadata {
	m := sb.config.GetMetadata()
	return &runtimeapi.PodSandboxMetadata{Name: m.GetName(), Uid: m.GetUid(), Namespace: m.GetNamespace(), Attempt: m.GetAttempt()}
}

// listItem shares the sandbox's labels and annotations (doc.go); a status
// copies them.
func (sb *sandbox) listItem() *runtimeapi.PodSandbox {
	return &runtimeapi.PodSandbox{
		Id:             sb.id,
		Metadata:       sb.metadata(),
		State:          sb.state,
		CreatedAt:      sb.createdAt,
		Labels:         sb.config.GetLabels(),
		Annotations:    sb.config.GetAnnotations(),
		RuntimeHandler: sb.handler,
	}
}

// ignoresSIGTERM reads AnnotationIgnoreSIGTERM for one container name.
func (sb *sandbox) ignoresSIGTERM(name string) bool {
	v, ok := sb.config.GetAnnotations()[AnnotationIgnoreSIGTERM]
	if !ok {
		return false
	}
	if v == "true" || v == "*" {
		return true
	}
	for _, n := range strings.Split(v, ",") {
		if strings.TrimSpace(n) == name {
			return true
		}
	}
	return false
}

// container is the runtime's record of a container.
type container struct {
	id         string
	seq        uint64 // creation order
	sandboxID  string
	config     *runtimeapi.ContainerConfig
	img        imageInfo // resolved at create time
	state      runtimeapi.ContainerState
	createdAt  int64
	startedAt  int64
	finishedAt int64
	exitCode   int32
	reason     string
	message    string
	logPath    string
	resources  *runtimeapi.ContainerResources
	pid        int
	nameKey    string
	ignoreTerm bool

	// Set while RUNNING (nil before start):
	proc *proc
	io   *containerIO
	// life is cancelled when the process exits; execs watch it, so they
	// die with the container as they would in its cgroup.
	life       context.Context
	lifeCancel context.CancelFunc
}

// imageInfo is what a container remembers of its image, so its status
// stays complete even after the image is removed.
type imageInfo struct {
	id        string // sha256:… (Image.id, PullImageResponse.image_ref)
	name      string // first repo tag, or what the client asked for
	digestRef string // repo@sha256:… (ContainerStatus.image_ref)
}

func (c *container) metadata() *runtimeapi.ContainerMetadata {
	m := c.config.GetMetadata()
	return &runtimeapi.ContainerMetadata{Name: m.GetName(), Attempt: m.GetAttempt()}
}

func (c *container) imageSpec() *runtimeapi.ImageSpec {
	in := c.config.GetImage()
	return &runtimeapi.ImageSpec{
		Image:              c.img.name,
		Annotations:        maps.Clone(in.GetAnnotations()),
		UserSpecifiedImage: in.GetUserSpecifiedImage(),
		RuntimeHandler:     in.GetRuntimeHandler(),
	}
}

// listItem shares the container's labels and annotations (doc.go).
func (c *container) listItem() *runtimeapi.Container {
	return &runtimeapi.Container{
		Id:           c.id,
		PodSandboxId: c.sandboxID,
		Metadata:     c.metadata(),
		Image:        c.imageSpec(),
		ImageRef:     c.img.digestRef,
		ImageId:      c.img.id,
		State:        c.state,
		CreatedAt:    c.createdAt,
		Labels:       c.config.GetLabels(),
		Annotations:  c.config.GetAnnotations(),
	}
}

func (c *container) status() *runtimeapi.ContainerStatus {
	sc := c.config.GetLinux().GetSecurityContext()
	stopSignal := c.config.GetStopSignal()
	if stopSignal == runtimeapi.Signal_RUNTIME_DEFAULT {
		stopSignal = runtimeapi.Signal_SIGTERM
	}
	return &runtimeapi.ContainerStatus{
		Id:          c.id,
		Metadata:    c.metadata(),
		State:       c.state,
		CreatedAt:   c.createdAt,
		StartedAt:   c.startedAt,
		FinishedAt:  c.finishedAt,
		ExitCode:    c.exitCode,
		Image:       c.imageSpec(),
		ImageRef:    c.img.digestRef,
		ImageId:     c.img.id,
		Reason:      c.reason,
		Message:     c.message,
		Labels:      maps.Clone(c.config.GetLabels()),
		Annotations: maps.Clone(c.config.GetAnnotations()),
		Mounts:      cloneMounts(c.config.GetMounts()),
		LogPath:     c.logPath,
		Resources:   cloneResources(c.resources),
		User: &runtimeapi.ContainerUser{Linux: &runtimeapi.LinuxContainerUser{
			Uid:                sc.GetRunAsUser().GetValue(),
			Gid:                sc.GetRunAsGroup().GetValue(),
			SupplementalGroups: append([]int64(nil), sc.GetSupplementalGroups()...),
		}},
		StopSignal: stopSignal,
	}
}

func (c *container) workDir() string {
	if d := c.config.GetWorkingDir(); d != "" {
		return d
	}
	return "/"
}

// env is the process environment: PATH and HOSTNAME first (containerd
// takes PATH from the image config; our images all use the Debian one),
// then the config's envs in order.
// A name set twice keeps its first place and its last value.
func (c *container) env(sb *sandbox) []string {
	var kv []string
	set := func(k, v string) {
		for i, e := range kv {
			if name, _, _ := strings.Cut(e, "="); name == k {
				kv[i] = k + "=" + v
				return
			}
		}
		kv = append(kv, k+"="+v)
	}
	set("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	set("HOSTNAME", sb.hostname())
	for _, e := range c.config.GetEnvs() {
		set(e.Key, string(e.Value))
	}
	return kv
}

// argv is the command line: command (the entrypoint) then args.
func (c *container) argv() []string {
	return append(append([]string(nil), c.config.GetCommand()...), c.config.GetArgs()...)
}

// logPathFor joins the sandbox log directory and the container log path,
// as containerd does; no log directory means no log file.
func logPathFor(sb *sandbox, cfg *runtimeapi.ContainerConfig) string {
	dir, rel := sb.config.GetLogDirectory(), cfg.GetLogPath()
	if dir == "" || rel == "" {
		return ""
	}
	return filepath.Join(dir, rel)
}

// matchLabels is the CRI label selector: every key/value must match.
func matchLabels(selector, labels map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
