package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/podworkers"
)

// labSyncer is the pod workers' Syncer for this lab. It says what the
// kubelet would do and does on the mock runtime only what makes the gating
// visible: create the pod's sandbox and containers, stop them, remove
// them. It never restarts a container and posts no status.
type labSyncer struct {
	cri     *cri.Client
	control string // the mock's control socket, for the printed curl command
	printf  func(format string, args ...any)
}

var _ podworkers.Syncer = (*labSyncer)(nil)

// SyncPod is the kubelet's SyncPod (kubelet.go:2019) reduced to: is the
// pod terminal? if not, does it exist in the runtime? podStatus is what
// the PLEG last recorded in the pod cache, newer than this worker's
// previous sync: that is why it can be trusted to say "no sandbox yet".
func (s *labSyncer) SyncPod(ctx context.Context, updateType kubetypes.SyncPodType, pod, _ *v1.Pod, podStatus *kubecontainer.PodStatus) (bool, func(), error) {
	name := podName(pod)
	// The kubelet computes the pod's phase from the container statuses and
	// stops syncing once it is Succeeded or Failed (kubelet.go:2087-2090).
	if terminal, why := isTerminal(pod, podStatus); terminal {
		s.printf("syncer    SyncPod(%s) %s: %s → terminal", updateType, name, why)
		return true, nil, nil
	}
	sandbox := readySandbox(podStatus)
	if sandbox == "" && len(podStatus.ContainerStatuses) == 0 {
		s.printf("syncer    SyncPod(%s) %s: the pod cache shows no sandbox and no container → create them", updateType, name)
		return false, nil, s.createPod(ctx, pod)
	}
	var parts []string
	for _, c := range pod.Spec.Containers {
		st := podStatus.FindContainerStatusByName(c.Name)
		switch {
		case st == nil:
			parts = append(parts, c.Name+"=missing")
		case st.State == kubecontainer.ContainerStateExited:
			parts = append(parts, fmt.Sprintf("%s=exited(%d)", c.Name, st.ExitCode))
		default:
			parts = append(parts, fmt.Sprintf("%s=%s", c.Name, st.State))
		}
	}
	note := "nothing to do"
	if pod.Spec.RestartPolicy != v1.RestartPolicyNever && strings.Contains(strings.Join(parts, " "), "exited") {
		note = "restartPolicy " + string(pod.Spec.RestartPolicy) + " would restart the exited container after a back-off; restarts are lab 17, not done here"
	}
	s.printf("syncer    SyncPod(%s) %s: sandbox %s, %s: %s", updateType, name, short(sandbox), strings.Join(parts, " "), note)
	return false, nil, nil
}

// createPod starts the sandbox, then each container, as the kubelet's
// runtime manager does for a new pod (kuberuntime_manager.go SyncPod:
// createPodSandbox, then startContainer per container). Each CRI call takes
// ctx: a kill cancels it half way, and the terminating sync stops whatever
// was made.
func (s *labSyncer) createPod(ctx context.Context, pod *v1.Pod) error {
	p := cri.Pod{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID), Labels: pod.Labels}
	podID, podCfg, err := s.cri.RunPod(ctx, p)
	if err != nil {
		return err
	}
	s.printf("CRI       RunPodSandbox → %s", short(podID))
	for _, c := range pod.Spec.Containers {
		if err := s.ensureImage(ctx, c.Image); err != nil {
			return err
		}
		env := map[string]string{}
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
		id, err := s.cri.StartContainer(ctx, podID, podCfg, p.ContainerConfig(cri.Container{Name: c.Name, Image: c.Image, Command: c.Command, Args: c.Args, Env: env}))
		if err != nil {
			return err
		}
		s.printf("CRI       CreateContainer + StartContainer %s → %s", c.Name, short(id))
		s.printf("          make it exit: curl -s --unix-socket %s -X POST http://fakecri/v1/containers/%s/exit -d '{\"exitCode\":1}'", s.control, id)
	}
	return nil
}

// ensureImage pulls an image the runtime does not have (the kubelet's
// image manager, EnsureImageExists, with the IfNotPresent policy).
func (s *labSyncer) ensureImage(ctx context.Context, image string) error {
	ok, err := s.cri.HasImage(ctx, image)
	if err != nil || ok {
		return err
	}
	if _, err := s.cri.Images.PullImage(s.cri.Context(ctx), &runtimeapi.ImageSpec{Image: image}, nil, nil); err != nil {
		return fmt.Errorf("PullImage %s: %w", image, err)
	}
	s.printf("CRI       PullImage %s", image)
	return nil
}

// SyncTerminatingPod stops every running container, all at once, then the
// sandbox: killPodWithSyncResult (kuberuntime_manager.go:1953) with one
// goroutine per container as killContainersWithSyncResult
// (kuberuntime_container.go:929). gracePeriod is the workers' effective
// grace period; nil when the pod ended on its own (then the pod's own).
// The kubelet's killContainer also never passes less than 2 s
// (minimumGracePeriodInSeconds, kuberuntime_manager.go:84); we pass the
// value as is, so what the workers decided is what you see.
func (s *labSyncer) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus, gracePeriod *int64, _ func(*v1.PodStatus)) error {
	grace, from := int64(30), "the default"
	switch {
	case gracePeriod != nil:
		grace, from = *gracePeriod, "the pod workers"
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		grace, from = *pod.Spec.TerminationGracePeriodSeconds, "the pod's spec"
	}
	var running []*kubecontainer.Status
	for _, c := range podStatus.ContainerStatuses {
		if c.State == kubecontainer.ContainerStateRunning {
			running = append(running, c)
		}
	}
	s.printf("syncer    SyncTerminatingPod %s: stop %d running container(s) with grace %ds (from %s)", podName(pod), len(running), grace, from)
	var wg sync.WaitGroup
	errs := make([]error, len(running))
	for i, c := range running {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			errs[i] = s.cri.StopContainer(ctx, c.ID.ID, time.Duration(grace)*time.Second)
			if errs[i] == nil {
				s.printf("CRI       StopContainer %s %s timeout=%ds: stopped after %s", c.Name, short(c.ID.ID), grace, time.Since(start).Round(10*time.Millisecond))
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		s.printf("syncer    SyncTerminatingPod %s cancelled: a newer update (a shorter grace period) is waiting", podName(pod))
		return err
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	for _, sb := range podStatus.SandboxStatuses {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			if err := s.cri.Runtime.StopPodSandbox(s.cri.Context(ctx), sb.Id); err != nil && !cri.IsNotFound(err) {
				return fmt.Errorf("StopPodSandbox %s: %w", short(sb.Id), err)
			}
			s.printf("CRI       StopPodSandbox %s", short(sb.Id))
		}
	}
	return nil
}

// SyncTerminatingRuntimePod stops a pod the runtime has and the config
// does not, with grace 1 as the kubelet does (kubelet.go:2438).
func (s *labSyncer) SyncTerminatingRuntimePod(ctx context.Context, rp *kubecontainer.Pod) error {
	s.printf("syncer    SyncTerminatingRuntimePod %s/%s: stop its %d container(s) with grace 1s", rp.Namespace, rp.Name, len(rp.Containers))
	for _, c := range rp.Containers {
		if err := s.cri.StopContainer(ctx, c.ID.ID, time.Second); err != nil {
			return err
		}
	}
	for _, sb := range rp.Sandboxes {
		if err := s.cri.Runtime.StopPodSandbox(s.cri.Context(ctx), sb.ID.ID); err != nil && !cri.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// SyncTerminatedPod removes the stopped containers and the sandbox. The
// kubelet's SyncTerminatedPod (kubelet.go:2458) only releases volumes,
// cgroups and status; it leaves removal to the container garbage collector
// (kuberuntime_gc.go) and the pod container deletor. We remove them here
// so the end of the pod is visible in the runtime too.
func (s *labSyncer) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus) error {
	s.printf("syncer    SyncTerminatedPod %s: remove %d container(s) and %d sandbox(es)", podName(pod), len(podStatus.ContainerStatuses), len(podStatus.SandboxStatuses))
	for _, c := range podStatus.ContainerStatuses {
		if err := s.cri.RemoveContainer(ctx, c.ID.ID); err != nil {
			return err
		}
		s.printf("CRI       RemoveContainer %s %s", c.Name, short(c.ID.ID))
	}
	for _, sb := range podStatus.SandboxStatuses {
		if err := s.cri.Runtime.RemovePodSandbox(s.cri.Context(ctx), sb.Id); err != nil && !cri.IsNotFound(err) {
			return fmt.Errorf("RemovePodSandbox %s: %w", short(sb.Id), err)
		}
		s.printf("CRI       RemovePodSandbox %s", short(sb.Id))
	}
	return nil
}

// isTerminal decides the pod's phase the way getPhase does
// (kubelet_pods.go:1653) for the two restart policies that let a pod end:
// Never ends when every container exited, OnFailure when every container
// exited with 0. Always never ends.
func isTerminal(pod *v1.Pod, st *kubecontainer.PodStatus) (bool, string) {
	if pod.Spec.RestartPolicy == v1.RestartPolicyAlways {
		return false, ""
	}
	failed := 0
	for _, c := range pod.Spec.Containers {
		cs := st.FindContainerStatusByName(c.Name)
		if cs == nil || cs.State != kubecontainer.ContainerStateExited {
			return false, ""
		}
		if cs.ExitCode != 0 {
			failed++
		}
	}
	if pod.Spec.RestartPolicy == v1.RestartPolicyOnFailure && failed > 0 {
		return false, ""
	}
	phase := v1.PodSucceeded
	if failed > 0 {
		phase = v1.PodFailed
	}
	return true, fmt.Sprintf("every container exited, restartPolicy %s: phase %s", pod.Spec.RestartPolicy, phase)
}

func readySandbox(st *kubecontainer.PodStatus) string {
	for _, sb := range st.SandboxStatuses {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			return sb.Id
		}
	}
	return ""
}

func podName(p *v1.Pod) string { return p.Namespace + "/" + p.Name }

// short is the 13 characters crictl shows of an ID.
func short(id string) string {
	if id == "" {
		return "(none)"
	}
	return id[:min(13, len(id))]
}
