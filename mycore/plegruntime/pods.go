package plegruntime

import (
	"context"
	"fmt"
	"maps"
	"sort"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

// Labels and annotations the kubelet puts on what it creates
// (k8s.io/kubelet/pkg/types/labels.go and
// pkg/kubelet/kuberuntime/labels.go, v1.36.3). They are
// how the kubelet finds its pods again in a runtime that knows nothing of
// Kubernetes: a container's pod is the value of its pod-UID label.
const (
	containerHashAnnotation         = "io.kubernetes.container.hash"
	containerRestartCountAnnotation = "io.kubernetes.container.restartCount"
)

// GetPods returns every pod the runtime has, sandboxes and containers
// grouped by pod UID, newest pod first. all=false keeps only READY sandboxes
// and RUNNING containers; the PLEG always asks for all
// (kuberuntime_manager.go:456).
func (r *Runtime) GetPods(ctx context.Context, all bool) ([]*kubecontainer.Pod, error) {
	pods, err := r.getPods(ctx, "", !all)
	if err != nil {
		return nil, err
	}
	result := make([]*kubecontainer.Pod, 0, len(pods))
	for _, p := range pods {
		result = append(result, p)
	}
	// Two pods may share a name while one of them is still terminating: the
	// newest first, so a search by name finds the live one (:469-476).
	sort.SliceStable(result, func(i, j int) bool { return result[i].CreatedAt > result[j].CreatedAt })
	return result, nil
}

// GetPod returns one pod's sandboxes and containers, or
// kubecontainer.ErrPodNotFound if the runtime has none (:440).
func (r *Runtime) GetPod(ctx context.Context, uid types.UID) (*kubecontainer.Pod, error) {
	pods, err := r.getPods(ctx, uid, false)
	if err != nil {
		return nil, err
	}
	if p := pods[uid]; p != nil {
		return p, nil
	}
	return nil, kubecontainer.ErrPodNotFound
}

// getPods is kuberuntime's getPods (:481-553): two list calls, then
// grouping by the pod UID — the sandbox's metadata, a container's label.
func (r *Runtime) getPods(ctx context.Context, uid types.UID, onlyRunningReady bool) (map[types.UID]*kubecontainer.Pod, error) {
	ctx = r.withLogger(ctx)
	name := r.runtimeName(ctx)
	timestamp := r.clock.Now()
	sel := maps.Clone(r.only)
	if uid != "" {
		if sel == nil {
			sel = map[string]string{}
		}
		sel[kubetypes.KubernetesPodUIDLabel] = string(uid)
	}
	sf := &runtimeapi.PodSandboxFilter{LabelSelector: sel}
	cf := &runtimeapi.ContainerFilter{LabelSelector: sel}
	if onlyRunningReady {
		sf.State = &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}
		cf.State = &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}
	}

	sandboxes, err := r.runtime.ListPodSandbox(ctx, sf)
	if err != nil {
		return nil, fmt.Errorf("CRI ListPodSandbox: %w", err)
	}
	// Newest first, so a pod's CreatedAt ends as its oldest sandbox's, as upstream.
	sort.SliceStable(sandboxes, func(i, j int) bool {
		if sandboxes[i].CreatedAt != sandboxes[j].CreatedAt {
			return sandboxes[i].CreatedAt > sandboxes[j].CreatedAt
		}
		return sandboxes[i].Id < sandboxes[j].Id
	})
	pods := map[types.UID]*kubecontainer.Pod{}
	for _, s := range sandboxes {
		if s.Metadata == nil || s.Id == "" {
			continue // upstream skips these too
		}
		id := types.UID(s.Metadata.Uid)
		p := pods[id]
		if p == nil {
			p = &kubecontainer.Pod{ID: id, Name: s.Metadata.Name, Namespace: s.Metadata.Namespace, Timestamp: timestamp}
			pods[id] = p
		}
		// A sandbox is reported as a container so the PLEG can diff it like
		// one (helpers.go:129-144): its state RUNNING or EXITED.
		p.Sandboxes = append(p.Sandboxes, &kubecontainer.Container{
			ID:           kubecontainer.ContainerID{Type: name, ID: s.Id},
			State:        kubecontainer.SandboxToContainerState(s.State),
			PodSandboxID: s.Id,
			CreatedAt:    s.CreatedAt,
		})
		p.CreatedAt = uint64(s.CreatedAt)
	}

	containers, err := r.runtime.ListContainers(ctx, cf)
	if err != nil {
		return nil, fmt.Errorf("CRI ListContainers: %w", err)
	}
	sort.SliceStable(containers, func(i, j int) bool {
		if containers[i].CreatedAt != containers[j].CreatedAt {
			return containers[i].CreatedAt > containers[j].CreatedAt
		}
		return containers[i].Id < containers[j].Id
	})
	for _, c := range containers {
		if c.Metadata == nil || c.Id == "" || c.Image == nil {
			continue
		}
		id := types.UID(c.Labels[kubetypes.KubernetesPodUIDLabel])
		p := pods[id]
		if p == nil {
			// A container whose sandbox is gone (or was listed a moment
			// before it appeared) still belongs to its pod by label.
			p = &kubecontainer.Pod{
				ID: id, Name: c.Labels[kubetypes.KubernetesPodNameLabel],
				Namespace: c.Labels[kubetypes.KubernetesPodNamespaceLabel], Timestamp: timestamp,
			}
			pods[id] = p
		}
		p.Containers = append(p.Containers, toContainer(name, c))
	}
	return pods, nil
}

// toContainer is kuberuntime's toKubeContainer (helpers.go:103-127).
func toContainer(runtimeName string, c *runtimeapi.Container) *kubecontainer.Container {
	imageID := c.ImageRef
	if c.ImageId != "" { // set by runtimes since CRI of Kubernetes 1.30
		imageID = c.ImageId
	}
	return &kubecontainer.Container{
		ID:                  kubecontainer.ContainerID{Type: runtimeName, ID: c.Id},
		Name:                c.GetMetadata().GetName(),
		ImageID:             imageID,
		ImageRef:            c.ImageRef,
		ImageRuntimeHandler: c.Image.RuntimeHandler,
		Image:               c.Image.Image,
		Hash:                hashOf(c.Annotations),
		State:               toState(c.State),
		PodSandboxID:        c.PodSandboxId,
		CreatedAt:           c.CreatedAt,
	}
}

// toState is helpers.go:72-85.
func toState(s runtimeapi.ContainerState) kubecontainer.State {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return kubecontainer.ContainerStateCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return kubecontainer.ContainerStateRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return kubecontainer.ContainerStateExited
	}
	return kubecontainer.ContainerStateUnknown
}
