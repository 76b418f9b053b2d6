package fakecri

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Container lifecycle, mirroring containerd's CRI plugin
// (internal/cri/server/container_{create,start,stop,remove,status,list}.go):
//
//	CreateContainer → CREATED   (sandbox must be READY, image present)
//	StartContainer  → RUNNING   (only from CREATED; a CRI container never restarts)
//	process ends / StopContainer → EXITED with exit code, reason, finished_at
//	RemoveContainer → gone      (a running container is killed first)

// CreateContainer creates a container in a READY sandbox.
func (r *Runtime) CreateContainer(_ context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	cfg := req.GetConfig()
	switch {
	case req.GetPodSandboxId() == "":
		return nil, status.Error(codes.InvalidArgument, "CreateContainer: pod_sandbox_id must be set")
	case cfg.GetMetadata().GetName() == "":
		return nil, status.Error(codes.InvalidArgument, "CreateContainer: config.metadata.name must be set")
	case cfg.GetImage().GetImage() == "":
		return nil, status.Error(codes.InvalidArgument, "CreateContainer: config.image.image must be set")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.checkOpen(); err != nil {
		return nil, err
	}
	sbID, err := resolveID(r.sandboxes, "pod sandbox", req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	sb := r.sandboxes[sbID]
	if sb.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, status.Errorf(codes.FailedPrecondition, "CreateContainer: pod sandbox %q is not ready", sbID)
	}
	img, ok := r.images.lookup(cfg.GetImage().GetImage())
	if !ok {
		return nil, status.Errorf(codes.NotFound, "CreateContainer: image %q not found (pull it first)", cfg.GetImage().GetImage())
	}
	id := newID()
	sm := sb.config.GetMetadata()
	key := strings.Join([]string{cfg.GetMetadata().GetName(), sm.GetName(), sm.GetNamespace(), sm.GetUid(), fmt.Sprint(cfg.GetMetadata().GetAttempt())}, "_")
	if err := r.reserveName(key, id); err != nil {
		return nil, err
	}
	r.seq++
	c := &container{
		id:        id,
		seq:       r.seq,
		sandboxID: sbID,
		config:    proto.Clone(cfg).(*runtimeapi.ContainerConfig),
		img:       img.info(cfg.GetImage().GetImage()),
		state:     runtimeapi.ContainerState_CONTAINER_CREATED,
		createdAt: r.nowNano(),
		logPath:   logPathFor(sb, cfg),
		nameKey:   key,
		ignoreTerm: cfg.GetAnnotations()[AnnotationIgnoreSIGTERM] == "true" ||
			sb.ignoresSIGTERM(cfg.GetMetadata().GetName()),
	}
	if res := cfg.GetLinux().GetResources(); res != nil {
		c.resources = &runtimeapi.ContainerResources{Linux: cloneLinuxResources(res)}
	}
	r.containers[id] = c
	sb.containers[id] = c
	r.emitContainerEvent(c, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, nil
}

// StartContainer starts a CREATED container.
func (r *Runtime) StartContainer(_ context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.checkOpen(); err != nil {
		return nil, err
	}
	id, err := resolveID(r.containers, "container", req.GetContainerId())
	if err != nil {
		return nil, err
	}
	c := r.containers[id]
	if c.state != runtimeapi.ContainerState_CONTAINER_CREATED {
		return nil, status.Errorf(codes.FailedPrecondition, "StartContainer: container %q is in %s state, not CONTAINER_CREATED", id, c.state)
	}
	sb := r.sandboxes[c.sandboxID]
	if sb.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, status.Errorf(codes.FailedPrecondition, "StartContainer: pod sandbox %q of container %q is not ready", sb.id, id)
	}
	if err := r.startProcess(c, sb); err != nil {
		return nil, err
	}
	r.emitContainerEvent(c, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	return &runtimeapi.StartContainerResponse{}, nil
}

// StopContainer stops a running container within timeout seconds; see
// stopProcess. Stopping a missing, created or exited container succeeds.
func (r *Runtime) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	r.mu.RLock()
	id, err := resolveID(r.containers, "container", req.GetContainerId())
	if status.Code(err) == codes.NotFound {
		r.mu.RUnlock()
		return &runtimeapi.StopContainerResponse{}, nil
	}
	if err != nil {
		r.mu.RUnlock()
		return nil, err
	}
	c := r.containers[id]
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.mu.RUnlock()
		return &runtimeapi.StopContainerResponse{}, nil
	}
	p, sig := c.proc, signalNumber(c.config.GetStopSignal())
	r.mu.RUnlock()

	timeout := time.Duration(max(req.GetTimeout(), 0)) * time.Second
	if err := stopProcess(ctx, p, timeout, sig); err != nil {
		return nil, err
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

// RemoveContainer removes a container, killing it first if it runs (the
// CRI says "forcibly"). Removing a missing container succeeds. The log
// file stays: the kubelet deletes logs itself (removeContainerLog).
func (r *Runtime) RemoveContainer(ctx context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	for {
		r.mu.Lock()
		id, err := resolveID(r.containers, "container", req.GetContainerId())
		if status.Code(err) == codes.NotFound {
			r.mu.Unlock()
			return &runtimeapi.RemoveContainerResponse{}, nil
		}
		if err != nil {
			r.mu.Unlock()
			return nil, err
		}
		c := r.containers[id]
		if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
			r.deleteContainer(c)
			r.mu.Unlock()
			return &runtimeapi.RemoveContainerResponse{}, nil
		}
		p := c.proc
		r.mu.Unlock()
		if err := stopProcess(ctx, p, 0, sigKILL); err != nil {
			return nil, err
		}
		// Loop: the container is EXITED now (or already removed by someone else).
	}
}

// deleteContainer forgets a non-running container. Caller holds r.mu.
func (r *Runtime) deleteContainer(c *container) {
	r.emitContainerEvent(c, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
	delete(r.containers, c.id)
	delete(r.names, c.nameKey)
	if sb := r.sandboxes[c.sandboxID]; sb != nil {
		delete(sb.containers, c.id)
	}
}

// ContainerStatus returns a container's status; verbose adds JSON info.
func (r *Runtime) ContainerStatus(_ context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	id, err := resolveID(r.containers, "container", req.GetContainerId())
	if err != nil {
		return nil, err
	}
	c := r.containers[id]
	resp := &runtimeapi.ContainerStatusResponse{Status: c.status()}
	if req.GetVerbose() {
		resp.Info = map[string]string{"info": c.verboseInfo()}
	}
	return resp, nil
}

func (c *container) verboseInfo() string {
	cfg, _ := protojson.Marshal(c.config)
	info := map[string]any{
		"sandboxID":      c.sandboxID,
		"pid":            c.pid,
		"ignoresSIGTERM": c.ignoreTerm,
		"mockProgram":    strings.Join(c.argv(), " "),
		"config":         json.RawMessage(orEmptyObject(cfg)),
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		info["pid"] = 0
	}
	b, _ := json.Marshal(info)
	return string(b)
}

// ListContainers lists containers matching every set filter field.
func (r *Runtime) ListContainers(_ context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	return &runtimeapi.ListContainersResponse{Containers: r.listContainers(req.GetFilter())}, nil
}

// StreamContainers is ListContainers in chunks (KEP-5825).
func (r *Runtime) StreamContainers(req *runtimeapi.StreamContainersRequest, stream grpc.ServerStreamingServer[runtimeapi.StreamContainersResponse]) error {
	return sendChunks(r.listContainers(req.GetFilter()), func(c []*runtimeapi.Container) error {
		return stream.Send(&runtimeapi.StreamContainersResponse{Containers: c})
	})
}

func (r *Runtime) listContainers(f *runtimeapi.ContainerFilter) []*runtimeapi.Container {
	r.mu.RLock()
	defer r.mu.RUnlock()
	cs := r.filterContainers(f.GetId(), f.GetPodSandboxId(), f.GetLabelSelector())
	out := make([]*runtimeapi.Container, 0, len(cs))
	for _, c := range cs {
		if f.GetState() != nil && c.state != f.GetState().GetState() {
			continue
		}
		out = append(out, c.listItem())
	}
	return out
}

// filterContainers applies the ID, sandbox and label filters shared by
// ListContainers and ListContainerStats; IDs may be unique prefixes.
// Caller holds r.mu.
func (r *Runtime) filterContainers(id, sandboxID string, selector map[string]string) []*container {
	cands := r.containers
	if sandboxID != "" {
		sid, err := resolveID(r.sandboxes, "pod sandbox", sandboxID)
		if err != nil {
			return nil
		}
		cands = r.sandboxes[sid].containers
	}
	if id != "" {
		full, err := resolveID(r.containers, "container", id)
		if err != nil {
			return nil
		}
		c, ok := cands[full]
		if !ok {
			return nil
		}
		cands = map[string]*container{full: c}
	}
	cs := make([]*container, 0, len(cands))
	for _, c := range cands {
		if matchLabels(selector, c.config.GetLabels()) {
			cs = append(cs, c)
		}
	}
	sortContainers(cs)
	return cs
}

// UpdateContainerResources records new resources for a created or running
// container (reported back in ContainerStatus.resources).
func (r *Runtime) UpdateContainerResources(_ context.Context, req *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id, err := resolveID(r.containers, "container", req.GetContainerId())
	if err != nil {
		return nil, err
	}
	c := r.containers[id]
	if c.state == runtimeapi.ContainerState_CONTAINER_EXITED {
		return nil, status.Errorf(codes.FailedPrecondition, "UpdateContainerResources: container %q has exited", id)
	}
	if req.GetLinux() != nil {
		c.resources = &runtimeapi.ContainerResources{Linux: cloneLinuxResources(req.GetLinux())}
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

// ReopenContainerLog reopens the log file after the kubelet rotated it.
func (r *Runtime) ReopenContainerLog(_ context.Context, req *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	r.mu.RLock()
	id, err := resolveID(r.containers, "container", req.GetContainerId())
	if err != nil {
		r.mu.RUnlock()
		return nil, err
	}
	c := r.containers[id]
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.mu.RUnlock()
		return nil, status.Errorf(codes.FailedPrecondition, "ReopenContainerLog: container %q is not running", id)
	}
	cio := c.io
	r.mu.RUnlock()
	if cio.log != nil {
		if err := cio.log.reopen(); err != nil {
			return nil, status.Errorf(codes.Internal, "ReopenContainerLog: container %q: %v", id, err)
		}
	}
	return &runtimeapi.ReopenContainerLogResponse{}, nil
}
