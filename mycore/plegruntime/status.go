package plegruntime

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crierror "k8s.io/cri-api/pkg/errors"
	kubetypes "k8s.io/kubelet/pkg/types"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

// GetPodStatus asks the runtime for the full status of one pod: each
// sandbox (newest first; the pod's IPs come from the newest, if READY) and
// each container (kuberuntime_manager.go:1998-2108, without the evented-PLEG
// branch). The status carries pod.Timestamp, the moment of the list the pod
// came from: the PLEG stores it in the cache with that time, and a pod
// worker waiting for "newer than my last sync" compares against it.
func (r *Runtime) GetPodStatus(ctx context.Context, pod *kubecontainer.Pod) (*kubecontainer.PodStatus, error) {
	if pod == nil {
		return nil, errors.New("GetPodStatus: pod is nil")
	}
	ctx = r.withLogger(ctx)
	name := r.runtimeName(ctx)
	st := &kubecontainer.PodStatus{
		ID: pod.ID, Name: pod.Name, Namespace: pod.Namespace, TimeStamp: pod.Timestamp,
		IPs: []string{}, SandboxStatuses: []*runtimeapi.PodSandboxStatus{},
		ContainerStatuses: []*kubecontainer.Status{}, ActiveContainerStatuses: []*kubecontainer.Status{},
	}
	var active string
	for i, s := range pod.Sandboxes {
		resp, err := r.runtime.PodSandboxStatus(ctx, s.ID.ID, false)
		// Removed between the list and now: as if the list had not seen it.
		if crierror.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("CRI PodSandboxStatus %s: %w", s.ID.ID, err)
		}
		if resp.GetStatus() == nil {
			return nil, errors.New("pod sandbox status is nil")
		}
		st.SandboxStatuses = append(st.SandboxStatuses, resp.Status)
		if i == 0 && resp.Status.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			active = s.ID.ID
			st.IPs = sandboxIPs(resp.Status)
		}
	}
	// getPodContainerStatuses, kuberuntime_container.go:650-684.
	for _, c := range pod.Containers {
		resp, err := r.runtime.ContainerStatus(ctx, c.ID.ID, false)
		if crierror.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("CRI ContainerStatus %s: %w", c.ID.ID, err)
		}
		if resp.GetStatus() == nil {
			return nil, errors.New("container status is nil")
		}
		cs := toStatus(name, resp.Status)
		withTerminationMessage(ctx, cs, resp.Status)
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
		if c.PodSandboxID == active {
			st.ActiveContainerStatuses = append(st.ActiveContainerStatuses, cs)
		}
	}
	newestFirst := func(s []*kubecontainer.Status) {
		sort.SliceStable(s, func(i, j int) bool { return s[i].CreatedAt.After(s[j].CreatedAt) })
	}
	newestFirst(st.ContainerStatuses)
	newestFirst(st.ActiveContainerStatuses)
	return st, nil
}

// GetContainerStatus is one container's status (kuberuntime_manager.go:2110).
func (r *Runtime) GetContainerStatus(ctx context.Context, _ types.UID, id kubecontainer.ContainerID) (*kubecontainer.Status, error) {
	ctx = r.withLogger(ctx)
	resp, err := r.runtime.ContainerStatus(ctx, id.ID, false)
	if err != nil {
		return nil, fmt.Errorf("CRI ContainerStatus %s: %w", id.ID, err)
	}
	if resp.GetStatus() == nil {
		return nil, errors.New("container status is nil")
	}
	cs := toStatus(r.runtimeName(ctx), resp.Status)
	withTerminationMessage(ctx, cs, resp.Status)
	return cs, nil
}

// toStatus is convertToKubeContainerStatus (kuberuntime_container.go:686-776)
// without the feature-gated user and stop signal; resources (the
// InPlacePodVerticalScaling part, GA) are resources.go's.
func toStatus(runtimeName string, s *runtimeapi.ContainerStatus) *kubecontainer.Status {
	imageID := s.ImageRef
	if s.ImageId != "" {
		imageID = s.ImageId
	}
	restarts, _ := strconv.Atoi(s.Annotations[containerRestartCountAnnotation])
	cs := &kubecontainer.Status{
		ID:           kubecontainer.ContainerID{Type: runtimeName, ID: s.Id},
		Name:         s.Labels[kubetypes.KubernetesContainerNameLabel],
		Image:        s.GetImage().GetImage(),
		ImageID:      imageID,
		ImageRef:     s.ImageRef,
		Hash:         hashOf(s.Annotations),
		RestartCount: restarts,
		State:        toState(s.State),
		CreatedAt:    time.Unix(0, s.CreatedAt),
		Resources:    toResources(s.Resources),
	}
	if cs.Name == "" {
		cs.Name = s.GetMetadata().GetName()
	}
	if s.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		cs.StartedAt = time.Unix(0, s.StartedAt)
	}
	if s.State == runtimeapi.ContainerState_CONTAINER_EXITED {
		cs.Reason, cs.Message = s.Reason, s.Message
		cs.ExitCode = int(s.ExitCode)
		cs.FinishedAt = time.Unix(0, s.FinishedAt)
	}
	return cs
}

// hashOf reads the container hash the kubelet stores as hex in an
// annotation (labels.go:117, :253); 0 if absent, as upstream.
func hashOf(annotations map[string]string) uint64 {
	h, _ := strconv.ParseUint(annotations[containerHashAnnotation], 16, 64)
	return h
}

// sandboxIPs is determinePodSandboxIPs (kuberuntime_sandbox.go:282): the
// primary IP, then any others; none with the node's network.
func sandboxIPs(s *runtimeapi.PodSandboxStatus) []string {
	ips := []string{}
	if n := s.GetNetwork(); n != nil {
		if n.Ip != "" {
			ips = append(ips, n.Ip)
		}
		for _, ip := range n.AdditionalIps {
			ips = append(ips, ip.Ip)
		}
	}
	return ips
}

// GeneratePodStatus turns a CRI container event into a pod status, for the
// evented PLEG (kuberuntime_manager.go:1974). An event without a sandbox
// status yields nil.
func (r *Runtime) GeneratePodStatus(event *runtimeapi.ContainerEventResponse) *kubecontainer.PodStatus {
	sb := event.GetPodSandboxStatus()
	if sb.GetMetadata() == nil {
		return nil
	}
	name := r.Type()
	st := &kubecontainer.PodStatus{
		ID: types.UID(sb.Metadata.Uid), Name: sb.Metadata.Name, Namespace: sb.Metadata.Namespace,
		IPs: sandboxIPs(sb), SandboxStatuses: []*runtimeapi.PodSandboxStatus{sb},
		ContainerStatuses: []*kubecontainer.Status{},
	}
	for _, cs := range event.ContainersStatuses {
		st.ContainerStatuses = append(st.ContainerStatuses, toStatus(name, cs))
	}
	sort.SliceStable(st.ContainerStatuses, func(i, j int) bool {
		return st.ContainerStatuses[i].CreatedAt.After(st.ContainerStatuses[j].CreatedAt)
	})
	return st
}
