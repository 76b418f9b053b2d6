package kuberuntime

import (
	"context"

	internalapi "k8s.io/cri-api/pkg/apis"

	"kubelet-labs/mycore/cri"
)

// stopRuntime is a CRI runtime that only stops things: StopContainer and
// StopPodSandbox call the test's functions, which decide what the runtime
// does and answers. The graders of the stages kill-grace and kill-pod use
// it: no process, no socket, no clock — a stop returns when the test says.
// Any other call would panic on the nil interface: killing a pod whose
// spec is known needs no other.
type stopRuntime struct {
	internalapi.RuntimeService
	container func(ctx context.Context, id string, timeout int64) error
	sandbox   func(ctx context.Context, id string) error
}

func (r *stopRuntime) StopContainer(ctx context.Context, id string, timeout int64) error {
	return r.container(ctx, id, timeout)
}

func (r *stopRuntime) StopPodSandbox(ctx context.Context, id string) error {
	return r.sandbox(ctx, id)
}

// managerOver is a Manager whose CRI runtime is rt, logging to nowhere.
func managerOver(rt internalapi.RuntimeService) *Manager {
	return New(&cri.Client{Runtime: rt}, Options{Log: func(string, ...any) {}})
}
