package teachloop

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/podworkers"
	"kubelet-labs/mycore/status"
)

// Syncer is the pod workers' Syncer for lab 10. It says what the kubelet
// would do and does on the runtime only what makes the gating visible:
// create the pod's sandbox and containers, stop them, remove them. It
// never restarts a container and posts no status.
type Syncer struct {
	CRI *cri.Client
	// Control is the mock's control socket, for the printed curl command
	// that makes a container exit ("": none printed).
	Control string
	// Log gets every decision and CRI call; nil is silent.
	Log func(format string, args ...any)
}

var _ podworkers.Syncer = (*Syncer)(nil)

func (s *Syncer) printf(format string, args ...any) {
	if s.Log != nil {
		s.Log(format, args...)
	}
}

// SyncPod is the kubelet's SyncPod (kubelet.go:2019) reduced to: is the
// pod terminal? if not, does it exist in the runtime? podStatus is what
// the PLEG last recorded in the pod cache, newer than this worker's
// previous sync: that is why it can be trusted to say "no sandbox yet".
func (s *Syncer) SyncPod(ctx context.Context, updateType kubetypes.SyncPodType, pod, _ *v1.Pod, podStatus *kubecontainer.PodStatus) (bool, func(), error) {
	name := klog.KObj(pod).String()
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
func (s *Syncer) createPod(ctx context.Context, pod *v1.Pod) error {
	p := cri.Pod{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID), Labels: pod.Labels}
	podID, podCfg, err := s.CRI.RunPod(ctx, p)
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
		id, err := s.CRI.StartContainer(ctx, podID, podCfg, p.ContainerConfig(cri.Container{Name: c.Name, Image: c.Image, Command: c.Command, Args: c.Args, Env: env}))
		if err != nil {
			return err
		}
		s.printf("CRI       CreateContainer + StartContainer %s → %s", c.Name, short(id))
		if s.Control != "" {
			s.printf("          make it exit: curl -s --unix-socket %s -X POST http://fakecri/v1/containers/%s/exit -d '{\"exitCode\":1}'", s.Control, id)
		}
	}
	return nil
}

// ensureImage pulls an image the runtime does not have (the kubelet's
// image manager, EnsureImageExists, with the IfNotPresent policy).
func (s *Syncer) ensureImage(ctx context.Context, image string) error {
	ok, err := s.CRI.HasImage(ctx, image)
	if err != nil || ok {
		return err
	}
	if _, err := s.CRI.Images.PullImage(s.CRI.Context(ctx), &runtimeapi.ImageSpec{Image: image}, nil, nil); err != nil {
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
func (s *Syncer) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus, gracePeriod *int64, _ func(*v1.PodStatus)) error {
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
	s.printf("syncer    SyncTerminatingPod %s: stop %d running container(s) with grace %ds (from %s)", klog.KObj(pod), len(running), grace, from)
	var wg sync.WaitGroup
	errs := make([]error, len(running))
	for i, c := range running {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			errs[i] = s.CRI.StopContainer(ctx, c.ID.ID, time.Duration(grace)*time.Second)
			if errs[i] == nil {
				s.printf("CRI       StopContainer %s %s timeout=%ds: stopped after %s", c.Name, short(c.ID.ID), grace, time.Since(start).Round(10*time.Millisecond))
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		s.printf("syncer    SyncTerminatingPod %s cancelled: a newer update (a shorter grace period) is waiting", klog.KObj(pod))
		return err
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	for _, sb := range podStatus.SandboxStatuses {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			if err := s.CRI.Runtime.StopPodSandbox(s.CRI.Context(ctx), sb.Id); err != nil && !cri.IsNotFound(err) {
				return fmt.Errorf("StopPodSandbox %s: %w", short(sb.Id), err)
			}
			s.printf("CRI       StopPodSandbox %s", short(sb.Id))
		}
	}
	return nil
}

// SyncTerminatingRuntimePod stops a pod the runtime has and the config
// does not, with grace 1 as the kubelet does (kubelet.go:2438).
func (s *Syncer) SyncTerminatingRuntimePod(ctx context.Context, rp *kubecontainer.Pod) error {
	s.printf("syncer    SyncTerminatingRuntimePod %s/%s: stop its %d container(s) with grace 1s", rp.Namespace, rp.Name, len(rp.Containers))
	for _, c := range rp.Containers {
		if err := s.CRI.StopContainer(ctx, c.ID.ID, time.Second); err != nil {
			return err
		}
	}
	for _, sb := range rp.Sandboxes {
		if err := s.CRI.Runtime.StopPodSandbox(s.CRI.Context(ctx), sb.ID.ID); err != nil && !cri.IsNotFound(err) {
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
func (s *Syncer) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus) error {
	s.printf("syncer    SyncTerminatedPod %s: remove %d container(s) and %d sandbox(es)", klog.KObj(pod), len(podStatus.ContainerStatuses), len(podStatus.SandboxStatuses))
	for _, c := range podStatus.ContainerStatuses {
		if err := s.CRI.RemoveContainer(ctx, c.ID.ID); err != nil {
			return err
		}
		s.printf("CRI       RemoveContainer %s %s", c.Name, short(c.ID.ID))
	}
	for _, sb := range podStatus.SandboxStatuses {
		if err := s.CRI.Runtime.RemovePodSandbox(s.CRI.Context(ctx), sb.Id); err != nil && !cri.IsNotFound(err) {
			return fmt.Errorf("RemovePodSandbox %s: %w", short(sb.Id), err)
		}
		s.printf("CRI       RemovePodSandbox %s", short(sb.Id))
	}
	return nil
}

// isTerminal is the phase the kubelet would compute (status.Generate, the
// kubelet's generateAPIPodStatus with getPhase, kubelet_pods.go:1653)
// from the pod cache: Succeeded or Failed once every container exited and
// the restart policy keeps them down. The lab posts no status, so the
// phase is only printed.
func isTerminal(pod *v1.Pod, st *kubecontainer.PodStatus) (bool, string) {
	phase := status.Generate(pod, st, pod.Status, false, status.GenerateOptions{}).Phase
	if !podutil.IsPodPhaseTerminal(phase) {
		return false, ""
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
