package virtualnode

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/mycore/podworkers"
	"kubelet-labs/mycore/status"
)

// Syncer is the pod workers' Syncer of this node: the kubelet's four sync
// methods (kubelet.go:2019, :2289, :2426, :2458), with the virtual runtime
// where the kubelet has the CRI. Status must be set before the first sync.
type Syncer struct {
	Runtime *Runtime
	Status  *status.Manager
	HostIPs []string // the node's InternalIPs, for status.hostIP(s)
	Log     func(format string, args ...any)
}

var _ podworkers.Syncer = (*Syncer)(nil)

// generate is the API status from what the runtime says, on top of the
// last status (generateAPIPodStatus, kubelet_pods.go:1891).
func (s *Syncer) generate(pod *v1.Pod, rs *kubecontainer.PodStatus, terminal bool) v1.PodStatus {
	old, ok := s.Status.GetPodStatus(pod.UID)
	if !ok {
		old = pod.Status
	}
	return status.Generate(pod, rs, old, terminal, status.GenerateOptions{HostIPs: s.HostIPs})
}

// SyncPod reports what the runtime shows, then starts the containers that
// never ran. As in the kubelet (kubelet.go:2074-2101), the status posted
// is what was observed before acting; the runtime's next change brings
// the next sync.
func (s *Syncer) SyncPod(ctx context.Context, updateType kubetypes.SyncPodType, pod, _ *v1.Pod, rs *kubecontainer.PodStatus) (bool, func(), error) {
	st := s.generate(pod, rs, false)
	s.Status.SetPodStatus(pod, st)
	if podutil.IsPodPhaseTerminal(st.Phase) {
		s.Log("sync    SyncPod(%s) %s: %s → terminal", updateType, klog.KObj(pod), status.Describe(st))
		return true, nil, nil
	}
	s.Log("sync    SyncPod(%s) %s: %s", updateType, klog.KObj(pod), status.Describe(st))
	// Start what never ran here. A container the last status shows as
	// running that this runtime does not know (the lab was restarted
	// while it ran) never gets here: Generate reports it ended, exit 137,
	// and with restartPolicy Never the pod is Failed — terminal above — so
	// the work is not done twice.
	for _, c := range pod.Spec.Containers {
		if err := ctx.Err(); err != nil {
			return false, nil, err // a kill arrived: start nothing more
		}
		if !s.Runtime.Has(pod.UID, c.Name) {
			s.Runtime.Start(pod, c)
		}
	}
	return false, nil, nil
}

// SyncTerminatingPod stops the pod's containers: their contexts are
// cancelled, the work stops, each reports exit code 143. Then the status
// with every container stopped (kubelet.go:2289-2408).
func (s *Syncer) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, rs *kubecontainer.PodStatus, gracePeriod *int64, podStatusFn func(*v1.PodStatus)) error {
	st := s.generate(pod, rs, false)
	if podStatusFn != nil {
		podStatusFn(&st)
	}
	s.Status.SetPodStatus(pod, st)
	grace := int64(v1.DefaultTerminationGracePeriodSeconds)
	switch {
	case gracePeriod != nil:
		grace = *gracePeriod
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	s.Log("sync    SyncTerminatingPod %s: cancel its running work (grace %ds)", klog.KObj(pod), grace)
	if err := s.Runtime.StopPod(ctx, pod.UID, grace); err != nil {
		return err
	}
	// Ask the runtime, not the cache: the stop just changed it (:2357-2385).
	stopped := s.Runtime.Status(pod.UID)
	for _, c := range stopped.ContainerStatuses {
		if c.State == kubecontainer.ContainerStateRunning {
			return fmt.Errorf("container %s still runs after StopPod", c.Name)
		}
	}
	s.Status.SetPodStatus(pod, s.generate(pod, stopped, true))
	return nil
}

// SyncTerminatingRuntimePod stops a pod the runtime has and the config
// does not (kubelet.go:2426-2447).
func (s *Syncer) SyncTerminatingRuntimePod(ctx context.Context, rp *kubecontainer.Pod) error {
	s.Log("sync    SyncTerminatingRuntimePod %s/%s: a pod no longer wanted → cancel its work", rp.Namespace, rp.Name)
	return s.Runtime.StopPod(ctx, rp.ID, 1)
}

// SyncTerminatedPod posts the final status and calls TerminatePod: from
// now on the status manager may delete the pod object, if it is being
// deleted (kubelet.go:2458-2525).
func (s *Syncer) SyncTerminatedPod(_ context.Context, pod *v1.Pod, _ *kubecontainer.PodStatus) error {
	st := s.generate(pod, s.Runtime.Status(pod.UID), true)
	s.Status.SetPodStatus(pod, st)
	s.Status.TerminatePod(pod)
	s.Log("sync    SyncTerminatedPod %s: %s, final status handed to the status manager", klog.KObj(pod), status.Describe(st))
	return nil
}
