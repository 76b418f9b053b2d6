package podworkers

import (
	"context"

	v1 "k8s.io/api/core/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
)

// Syncer does the actual work for one pod; the workers decide which method
// runs when. It is the kubelet's podSyncer (pod_workers.go:265-286), method
// for method, so the kubelet's own implementations fit. Methods are called
// concurrently for different pods, never for the same pod.
type Syncer interface {
	// SyncPod makes the runtime match the pod's spec. Returning true says
	// the pod has reached a terminal state (all containers exited and will
	// not restart): the worker moves it to terminating. postSync, if not
	// nil, runs after the worker recorded the sync time. It must return
	// early with ctx.Err() when ctx is cancelled (a kill arrived).
	SyncPod(ctx context.Context, updateType kubetypes.SyncPodType, pod *v1.Pod, mirrorPod *v1.Pod, podStatus *kubecontainer.PodStatus) (isTerminal bool, postSync func(), err error)
	// SyncTerminatingPod stops every container within gracePeriod seconds.
	// It is called until it returns nil, with a grace period that can only
	// shrink between calls.
	SyncTerminatingPod(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus, gracePeriod *int64, podStatusFn func(*v1.PodStatus)) error
	// SyncTerminatingRuntimePod stops the containers of a pod that exists
	// only in the runtime (no config). It must not return nil while a
	// container may still run.
	SyncTerminatingRuntimePod(ctx context.Context, runningPod *kubecontainer.Pod) error
	// SyncTerminatedPod releases what the stopped pod still holds. Once it
	// returns nil the pod is finished on this node.
	SyncTerminatedPod(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus) error
}

// Funcs is a Syncer made of functions; a nil function succeeds at once
// (and a nil SyncPod never reports the pod terminal). Handy for tests and
// for labs that only print.
type Funcs struct {
	Pod                   func(ctx context.Context, updateType kubetypes.SyncPodType, pod, mirrorPod *v1.Pod, podStatus *kubecontainer.PodStatus) (bool, func(), error)
	TerminatingPod        func(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus, gracePeriod *int64, podStatusFn func(*v1.PodStatus)) error
	TerminatingRuntimePod func(ctx context.Context, runningPod *kubecontainer.Pod) error
	TerminatedPod         func(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus) error
}

var _ Syncer = Funcs{}

func (f Funcs) SyncPod(ctx context.Context, updateType kubetypes.SyncPodType, pod, mirrorPod *v1.Pod, podStatus *kubecontainer.PodStatus) (bool, func(), error) {
	if f.Pod == nil {
		return false, nil, nil
	}
	return f.Pod(ctx, updateType, pod, mirrorPod, podStatus)
}

func (f Funcs) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus, gracePeriod *int64, podStatusFn func(*v1.PodStatus)) error {
	if f.TerminatingPod == nil {
		return nil
	}
	return f.TerminatingPod(ctx, pod, podStatus, gracePeriod, podStatusFn)
}

func (f Funcs) SyncTerminatingRuntimePod(ctx context.Context, runningPod *kubecontainer.Pod) error {
	if f.TerminatingRuntimePod == nil {
		return nil
	}
	return f.TerminatingRuntimePod(ctx, runningPod)
}

func (f Funcs) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus) error {
	if f.TerminatedPod == nil {
		return nil
	}
	return f.TerminatedPod(ctx, pod, podStatus)
}
