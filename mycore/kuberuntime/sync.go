package kuberuntime

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubekr "k8s.io/kubernetes/pkg/kubelet/kuberuntime"
	runtimeutil "k8s.io/kubernetes/pkg/kubelet/kuberuntime/util"
)

// SyncPod makes the runtime match the pod, the shape of the runtime
// manager's SyncPod (kuberuntime_manager.go:1450): decide, then act.
//
//  1. No ready sandbox (or a stale one): a new sandbox, attempt+1, and every
//     container starts again in it (computePodActions :1179-1260). A pod
//     whose containers all ran and must not restart gets no new sandbox.
//  2. Otherwise each container that is not running starts if the restart
//     policy says so (kubecontainer.ShouldContainerBeRestarted) and its
//     crash-loop back-off has passed (doBackOff :1908).
//  3. Nothing left running and nothing to start: the sandbox is stopped.
//
// This is the part of computePodActions a node without probes needs; the
// rest (spec hash changes, liveness and startup failures, init containers)
// is the next step of the course. node fills the downward-API fields of
// the containers' env. backOff is the kubelet's crashLoopBackOff (10 s
// doubling to 5 min; kubelet.go:1068).
func (m *Manager) SyncPod(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus, node PodIPs, backOff *flowcontrol.Backoff) (result kubecontainer.PodSyncResult) {
	createSandbox, attempt, sandboxID := runtimeutil.PodSandboxChanged(pod, podStatus)
	toStart := []int{}
	if createSandbox {
		if !restartOnFailure(pod) && attempt != 0 && len(podStatus.ContainerStatuses) != 0 {
			// restartPolicy Never and the pod ran: it is over, never a new sandbox (:1203).
			result.AddPodSyncResult(m.stopPod(ctx, pod, podStatus))
			return result
		}
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			if pod.Spec.RestartPolicy == v1.RestartPolicyOnFailure && succeeded(c, podStatus) {
				continue
			}
			toStart = append(toStart, i)
		}
		if len(toStart) == 0 && kubekr.HasAnyRegularContainerCreated(pod, podStatus) {
			result.AddPodSyncResult(m.stopPod(ctx, pod, podStatus))
			return result
		}
		// Whatever still runs of the old sandbox goes first (KillPod in SyncPod step 2).
		if r := m.stopPod(ctx, pod, podStatus); r.Error() != nil {
			result.AddPodSyncResult(r)
			return result
		}
		r := kubecontainer.NewSyncResult(kubecontainer.CreatePodSandbox, string(pod.UID))
		result.AddSyncResult(r)
		id, err := m.CreateSandbox(ctx, pod, attempt)
		if err != nil {
			r.Fail(kubecontainer.ErrCreatePodSandbox, err.Error())
			return result
		}
		sandboxID = id
		st, err := m.cri.PodStatus(ctx, id)
		if err != nil {
			r.Fail(kubecontainer.ErrCreatePodSandbox, err.Error())
			return result
		}
		node.PodIPs = sandboxIPs(st)
	} else {
		node.PodIPs = podStatus.IPs
		running := 0
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			st := podStatus.FindContainerStatusByName(c.Name)
			if st != nil && st.State == kubecontainer.ContainerStateRunning {
				running++
				continue
			}
			if kubecontainer.ShouldContainerBeRestarted(klog.Background(), c, pod, podStatus) {
				toStart = append(toStart, i)
			}
		}
		if running == 0 && len(toStart) == 0 {
			// every container is done and none restarts (:1390): release the sandbox
			result.AddPodSyncResult(m.stopPod(ctx, pod, podStatus))
			return result
		}
	}

	sandboxCfg := m.SandboxConfig(pod, attempt)
	for _, i := range toStart {
		c := &pod.Spec.Containers[i]
		r := kubecontainer.NewSyncResult(kubecontainer.StartContainer, c.Name)
		result.AddSyncResult(r)
		if wait, msg := doBackOff(pod, c, podStatus, backOff); wait != nil {
			r.Fail(wait, msg)
			continue
		}
		if _, err := m.StartContainer(ctx, sandboxID, sandboxCfg, pod, c, podStatus, node); err != nil {
			r.Fail(kubecontainer.ErrRunContainer, err.Error())
		}
	}
	return result
}

// doBackOff is the runtime manager's doBackOff (kuberuntime_manager.go:1908):
// a container that exited at FinishedAt may start again only once the
// back-off of its key (pod, container, spec hash) since then has passed;
// each restart doubles the next wait.
func doBackOff(pod *v1.Pod, c *v1.Container, podStatus *kubecontainer.PodStatus, backOff *flowcontrol.Backoff) (error, string) {
	if backOff == nil {
		return nil, ""
	}
	var last *kubecontainer.Status
	for _, s := range podStatus.ContainerStatuses {
		if s.Name == c.Name && s.State == kubecontainer.ContainerStateExited {
			last = s
			break
		}
	}
	if last == nil {
		return nil, ""
	}
	key := kubekr.GetBackoffKey(pod, c)
	if backOff.IsInBackOffSince(key, last.FinishedAt) {
		wait := backOff.Get(key)
		return kubecontainer.NewBackoffError(kubecontainer.ErrCrashLoopBackOff, last.FinishedAt.Add(wait)),
			fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", wait, c.Name, pod.Name, pod.Namespace, pod.UID)
	}
	backOff.Next(key, last.FinishedAt)
	return nil, ""
}

// stopPod stops what still runs of the pod — every running container,
// then every ready sandbox — with the pod's grace period (the SyncPod
// path's KillPod; a deleted pod is stopped by the pod workers' terminating
// sync instead, with the grace they decided).
func (m *Manager) stopPod(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus) (result kubecontainer.PodSyncResult) {
	grace := int64(30)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	for _, c := range podStatus.ContainerStatuses {
		if c.State != kubecontainer.ContainerStateRunning {
			continue
		}
		r := kubecontainer.NewSyncResult(kubecontainer.KillContainer, c.Name)
		result.AddSyncResult(r)
		if err := m.cri.StopContainer(ctx, c.ID.ID, time.Duration(max(grace, 2))*time.Second); err != nil {
			r.Fail(kubecontainer.ErrKillContainer, err.Error())
		}
	}
	for _, sb := range podStatus.SandboxStatuses {
		if sb.State != runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		r := kubecontainer.NewSyncResult(kubecontainer.KillPodSandbox, string(pod.UID))
		result.AddSyncResult(r)
		if err := m.cri.Runtime.StopPodSandbox(m.cri.Context(ctx), sb.Id); err != nil && !isNotFound(err) {
			r.Fail(kubecontainer.ErrKillPodSandbox, err.Error())
			continue
		}
		m.log("CRI StopPodSandbox %s/%s %s", pod.Namespace, pod.Name, short(sb.Id))
	}
	return result
}

// restartOnFailure is shouldRestartOnFailure (kuberuntime_manager.go).
func restartOnFailure(pod *v1.Pod) bool { return pod.Spec.RestartPolicy != v1.RestartPolicyNever }

// succeeded is containerSucceeded (kuberuntime_manager.go): its last
// instance exited 0.
func succeeded(c *v1.Container, podStatus *kubecontainer.PodStatus) bool {
	s := podStatus.FindContainerStatusByName(c.Name)
	return s != nil && s.State == kubecontainer.ContainerStateExited && s.ExitCode == 0
}

// sandboxIPs is determinePodSandboxIPs (kuberuntime_sandbox.go:282).
func sandboxIPs(s *runtimeapi.PodSandboxStatus) []string {
	var ips []string
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
