package fakecri

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Sandbox lifecycle, mirroring containerd's CRI plugin
// (internal/cri/server/sandbox_{run,stop,remove,status,list}.go):
//
//	RunPodSandbox  → READY (an IP from the pod CIDR unless host network)
//	StopPodSandbox → NOTREADY, every running container SIGKILLed (137)
//	RemovePodSandbox → containers force-removed, then the sandbox
//
// Stop and Remove of an unknown sandbox succeed, as the CRI asks.

func (r *Runtime) checkOpen() error {
	if r.closed {
		return status.Error(codes.Unavailable, "runtime is shut down")
	}
	return nil
}

// RunPodSandbox creates and "starts" a sandbox.
func (r *Runtime) RunPodSandbox(_ context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	cfg := req.GetConfig()
	md := cfg.GetMetadata()
	if cfg == nil || md == nil || md.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "RunPodSandbox: config.metadata.name must be set")
	}
	if h := req.GetRuntimeHandler(); h != "" && !slices.Contains(r.opts.handlers, h) {
		return nil, status.Errorf(codes.InvalidArgument, "RunPodSandbox: no runtime for %q is configured", h)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.checkOpen(); err != nil {
		return nil, err
	}
	id := newID()
	key := strings.Join([]string{md.GetName(), md.GetNamespace(), md.GetUid(), fmt.Sprint(md.GetAttempt())}, "_")
	if err := r.reserveName(key, id); err != nil {
		return nil, err
	}
	r.seq++
	sb := &sandbox{
		id:         id,
		seq:        r.seq,
		config:     proto.Clone(cfg).(*runtimeapi.PodSandboxConfig),
		handler:    req.GetRuntimeHandler(),
		state:      runtimeapi.PodSandboxState_SANDBOX_READY,
		createdAt:  r.nowNano(),
		nameKey:    key,
		containers: map[string]*container{},
		resources:  cloneLinuxResources(cfg.GetLinux().GetResources()),
	}
	if !sb.hostNetwork() {
		ip, err := r.ipam.allocate()
		if err != nil {
			delete(r.names, key)
			return nil, err
		}
		sb.ip = ip
	}
	r.nextPid++
	sb.pid = r.nextPid
	r.sandboxes[id] = sb
	// containerd announces a sandbox like a container: created, then started.
	r.emitSandboxEvent(sb, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	r.emitSandboxEvent(sb, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

// StopPodSandbox marks the sandbox NOTREADY and kills its containers.
func (r *Runtime) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	r.mu.Lock()
	id, err := resolveID(r.sandboxes, "pod sandbox", req.GetPodSandboxId())
	if status.Code(err) == codes.NotFound {
		r.mu.Unlock()
		return &runtimeapi.StopPodSandboxResponse{}, nil // idempotent
	}
	if err != nil {
		r.mu.Unlock()
		return nil, err
	}
	sb := r.sandboxes[id]
	// NOTREADY first: from here on StartContainer refuses this sandbox,
	// so no container can start behind our back while we kill the others.
	r.markNotReady(sb)
	procs := runningProcs(sb)
	r.mu.Unlock()

	// containerd stops a sandbox's containers with timeout 0, i.e. SIGKILL;
	// the kubelet has already given them their grace period.
	for _, p := range procs {
		if err := stopProcess(ctx, p, 0, sigKILL); err != nil {
			return nil, err
		}
	}
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

// markNotReady flips a READY sandbox to NOTREADY. Caller holds r.mu.
func (r *Runtime) markNotReady(sb *sandbox) bool {
	if sb.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		return false
	}
	sb.state = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	r.emitSandboxEvent(sb, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
	return true
}

// runningProcs lists the processes of a sandbox's running containers.
// Caller holds r.mu.
func runningProcs(sb *sandbox) []*proc {
	var ps []*proc
	for _, c := range sb.containers {
		if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
			ps = append(ps, c.proc)
		}
	}
	return ps
}

// RemovePodSandbox force-removes the sandbox and all its containers.
func (r *Runtime) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	if _, err := r.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: req.GetPodSandboxId()}); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	id, err := resolveID(r.sandboxes, "pod sandbox", req.GetPodSandboxId())
	if status.Code(err) == codes.NotFound {
		return &runtimeapi.RemovePodSandboxResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	sb := r.sandboxes[id]
	if procs := runningProcs(sb); len(procs) > 0 {
		// Only possible if a container started between the stop above and
		// now — impossible while NOTREADY, so this is a bug guard.
		return nil, status.Errorf(codes.FailedPrecondition, "pod sandbox %q still has running containers", id)
	}
	for _, c := range sb.containers {
		r.deleteContainer(c)
	}
	// Send the DELETED event while the sandbox still exists: the evented
	// PLEG needs its metadata to know which pod to forget.
	r.emitSandboxEvent(sb, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
	delete(r.sandboxes, id)
	delete(r.names, sb.nameKey)
	if sb.ip != "" {
		r.ipam.release(sb.ip)
	}
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

// PodSandboxStatus returns the sandbox status and, as 1.36 runtimes do for
// the evented PLEG, its containers' statuses and a timestamp.
func (r *Runtime) PodSandboxStatus(_ context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	id, err := resolveID(r.sandboxes, "pod sandbox", req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	sb := r.sandboxes[id]
	resp := &runtimeapi.PodSandboxStatusResponse{
		Status:             sb.status(),
		ContainersStatuses: sandboxContainerStatuses(sb),
		Timestamp:          r.nowNano(),
	}
	if req.GetVerbose() {
		resp.Info = map[string]string{"info": sb.verboseInfo()}
	}
	return resp, nil
}

// verboseInfo is JSON, like containerd's, so crictl inspectp shows it.
func (sb *sandbox) verboseInfo() string {
	cfg, _ := protojson.Marshal(sb.config)
	b, _ := json.Marshal(map[string]any{
		"pid":            sb.pid,
		"runtimeHandler": sb.handler,
		"hostNetwork":    sb.hostNetwork(),
		"image":          "pause (fakecri runs no sandbox process)",
		"config":         json.RawMessage(orEmptyObject(cfg)),
	})
	return string(b)
}

func orEmptyObject(b []byte) []byte {
	if len(b) == 0 {
		return []byte("{}")
	}
	return b
}

// ListPodSandbox lists sandboxes matching every set filter field.
func (r *Runtime) ListPodSandbox(_ context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	return &runtimeapi.ListPodSandboxResponse{Items: r.listSandboxes(req.GetFilter())}, nil
}

// StreamPodSandboxes is ListPodSandbox in chunks (KEP-5825).
func (r *Runtime) StreamPodSandboxes(req *runtimeapi.StreamPodSandboxesRequest, stream grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxesResponse]) error {
	return sendChunks(r.listSandboxes(req.GetFilter()), func(c []*runtimeapi.PodSandbox) error {
		return stream.Send(&runtimeapi.StreamPodSandboxesResponse{PodSandboxes: c})
	})
}

func (r *Runtime) listSandboxes(f *runtimeapi.PodSandboxFilter) []*runtimeapi.PodSandbox {
	r.mu.RLock()
	defer r.mu.RUnlock()
	cands := r.sandboxes
	if f.GetId() != "" {
		// A filter ID may be a prefix, like containerd; no match is an empty list.
		id, err := resolveID(r.sandboxes, "pod sandbox", f.GetId())
		if err != nil {
			return []*runtimeapi.PodSandbox{}
		}
		cands = map[string]*sandbox{id: r.sandboxes[id]}
	}
	sbs := make([]*sandbox, 0, len(cands))
	for _, sb := range cands {
		if f.GetState() != nil && sb.state != f.GetState().GetState() {
			continue
		}
		if !matchLabels(f.GetLabelSelector(), sb.config.GetLabels()) {
			continue
		}
		sbs = append(sbs, sb)
	}
	sort.Slice(sbs, func(i, j int) bool { return sbs[i].seq < sbs[j].seq })
	out := make([]*runtimeapi.PodSandbox, len(sbs))
	for i, sb := range sbs {
		out[i] = sb.listItem()
	}
	return out
}

// UpdatePodSandboxResources records the pod-level resources the kubelet
// sends on in-place resize; there is no cgroup to apply them to.
func (r *Runtime) UpdatePodSandboxResources(_ context.Context, req *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id, err := resolveID(r.sandboxes, "pod sandbox", req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	if res := req.GetResources(); res != nil {
		r.sandboxes[id].resources = cloneLinuxResources(res)
	}
	return &runtimeapi.UpdatePodSandboxResourcesResponse{}, nil
}
