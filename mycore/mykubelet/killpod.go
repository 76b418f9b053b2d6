package mykubelet

import (
	"context"

	v1 "k8s.io/api/core/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

// killPod is the kubelet's killPod (kubelet_pods.go): the runtime manager
// stops the containers in parallel, each with its grace period (never under
// 2 s), then the sandboxes — mycore/kuberuntime KillPod, labs 15 and 16.
// grace, if set, overrides the pod's own; pod may be nil for a pod only the
// runtime knows.
func (k *Kubelet) killPod(ctx context.Context, pod *v1.Pod, rp kubecontainer.Pod, grace *int64) error {
	return k.manager.KillPod(ctx, pod, rp, grace)
}
