package status

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func specPod(policy v1.RestartPolicy, containers ...string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-1"},
		Spec:       v1.PodSpec{RestartPolicy: policy, NodeName: "n"},
	}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c, Image: "busybox"})
	}
	return p
}

// sandbox is a ready sandbox with an IP, as a CRI runtime reports it.
func sandbox(ip string) *runtimeapi.PodSandboxStatus {
	return &runtimeapi.PodSandboxStatus{
		Id: "sb1", State: runtimeapi.PodSandboxState_SANDBOX_READY,
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "default", Uid: "uid-1"},
		Network:  &runtimeapi.PodSandboxNetworkStatus{Ip: ip},
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{
			Network: runtimeapi.NamespaceMode_POD}}},
	}
}

func running(name, id string, restarts int) *kubecontainer.Status {
	return &kubecontainer.Status{
		ID: kubecontainer.ContainerID{Type: "containerd", ID: id}, Name: name, State: kubecontainer.ContainerStateRunning,
		CreatedAt: t0, StartedAt: t0, Image: "docker.io/library/busybox:latest", ImageRef: "sha256:abc", RestartCount: restarts,
	}
}

func exited(name, id string, code int, reason, msg string, created time.Time) *kubecontainer.Status {
	return &kubecontainer.Status{
		ID: kubecontainer.ContainerID{Type: "containerd", ID: id}, Name: name, State: kubecontainer.ContainerStateExited,
		CreatedAt: created, StartedAt: created, FinishedAt: created.Add(time.Second), ExitCode: code, Reason: reason, Message: msg,
		Image: "docker.io/library/busybox:latest", ImageRef: "sha256:abc",
	}
}

func runtimeStatus(ips []string, sandboxes []*runtimeapi.PodSandboxStatus, cs ...*kubecontainer.Status) *kubecontainer.PodStatus {
	return &kubecontainer.PodStatus{ID: "uid-1", Name: "p", Namespace: "default", IPs: ips, SandboxStatuses: sandboxes, ContainerStatuses: cs}
}

func condition(s v1.PodStatus, t v1.PodConditionType) string {
	_, c := podutil.GetPodCondition(&s, t)
	if c == nil {
		return "(none)"
	}
	if c.Reason != "" {
		return string(c.Status) + "/" + c.Reason
	}
	return string(c.Status)
}

func TestGenerate(t *testing.T) {
	runningStatus := v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{
		Name: "main", ContainerID: "containerd://c1", RestartCount: 0,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}},
	}}}
	tests := []struct {
		name     string
		pod      *v1.Pod
		rs       *kubecontainer.PodStatus
		old      v1.PodStatus
		terminal bool
		hostIPs  []string
		// expectations
		phase                   v1.PodPhase
		state                   string // Describe(status)
		podIP, hostIP           string
		ready, containersReady  string
		initialized, readyToRun string
		check                   func(t *testing.T, s v1.PodStatus)
	}{{
		name: "nothing in the runtime yet: Pending, waiting ContainerCreating",
		pod:  specPod(v1.RestartPolicyNever, "main"), rs: runtimeStatus(nil, nil),
		phase: v1.PodPending, state: "Pending [main waiting ContainerCreating]",
		ready: "False/ContainersNotReady", containersReady: "False/ContainersNotReady", initialized: "True", readyToRun: "False",
	}, {
		name: "sandbox ready, container running: Running, ready, IPs",
		pod:  specPod(v1.RestartPolicyNever, "main"), rs: runtimeStatus([]string{"10.88.0.5"}, []*runtimeapi.PodSandboxStatus{sandbox("10.88.0.5")}, running("main", "c1", 0)),
		hostIPs: []string{"192.168.5.15"},
		phase:   v1.PodRunning, state: "Running [main running ready]", podIP: "10.88.0.5", hostIP: "192.168.5.15",
		ready: "True", containersReady: "True", initialized: "True", readyToRun: "True",
		check: func(t *testing.T, s v1.PodStatus) {
			c := s.ContainerStatuses[0]
			if c.ContainerID != "containerd://c1" || c.ImageID != "sha256:abc" || c.Image != "docker.io/library/busybox:latest" ||
				c.Started == nil || !*c.Started || !c.State.Running.StartedAt.Time.Equal(t0) {
				t.Errorf("container status = %+v", c)
			}
			if s.QOSClass != v1.PodQOSBestEffort {
				t.Errorf("qosClass = %q", s.QOSClass)
			}
		},
	}, {
		name: "exited 0, restartPolicy Never: Succeeded, Completed",
		pod:  specPod(v1.RestartPolicyNever, "main"), rs: runtimeStatus(nil, nil, exited("main", "c1", 0, "Completed", "", t0)),
		old:   runningStatus,
		phase: v1.PodSucceeded, state: "Succeeded [main exited 0 Completed]",
		ready: "False/PodCompleted", containersReady: "False/PodCompleted", initialized: "True/PodCompleted", readyToRun: "False",
		check: func(t *testing.T, s v1.PodStatus) {
			term := s.ContainerStatuses[0].State.Terminated
			if !term.FinishedAt.Time.Equal(t0.Add(time.Second)) || term.ContainerID != "containerd://c1" {
				t.Errorf("terminated = %+v", term)
			}
		},
	}, {
		name: "exited 3 with a message, Never: Failed, the exit code and message kept",
		pod:  specPod(v1.RestartPolicyNever, "main"), rs: runtimeStatus(nil, nil, exited("main", "c1", 3, "Error", "no such host", t0)),
		old:   runningStatus,
		phase: v1.PodFailed, state: "Failed [main exited 3 Error]",
		ready: "False/PodFailed", containersReady: "False/PodFailed", initialized: "True", readyToRun: "False",
		check: func(t *testing.T, s v1.PodStatus) {
			if m := s.ContainerStatuses[0].State.Terminated.Message; m != "no such host" {
				t.Errorf("message = %q", m)
			}
		},
	}, {
		name: "exited 1, restartPolicy Always: still Running (it will restart)",
		pod:  specPod(v1.RestartPolicyAlways, "main"), rs: runtimeStatus(nil, nil, exited("main", "c1", 1, "Error", "", t0)),
		phase: v1.PodRunning, state: "Running [main exited 1 Error]",
		ready: "False/ContainersNotReady", containersReady: "False/ContainersNotReady", initialized: "True", readyToRun: "False",
	}, {
		name: "exited 1, Always, but the pod is terminal: Failed",
		pod:  specPod(v1.RestartPolicyAlways, "main"), rs: runtimeStatus(nil, nil, exited("main", "c1", 1, "Error", "", t0)),
		terminal: true,
		phase:    v1.PodFailed, state: "Failed [main exited 1 Error]",
		ready: "False/PodFailed", containersReady: "False/PodFailed", initialized: "True", readyToRun: "False",
	}, {
		name: "restarted: the newest container is the state, the one before it lastState",
		pod:  specPod(v1.RestartPolicyAlways, "main"),
		rs: runtimeStatus([]string{"10.88.0.5"}, []*runtimeapi.PodSandboxStatus{sandbox("10.88.0.5")},
			exited("main", "c1", 2, "Error", "", t0), func() *kubecontainer.Status {
				s := running("main", "c2", 1)
				s.CreatedAt = t0.Add(time.Minute)
				return s
			}()),
		phase: v1.PodRunning, state: "Running [main running ready]", podIP: "10.88.0.5",
		ready: "True", containersReady: "True", initialized: "True", readyToRun: "True",
		check: func(t *testing.T, s v1.PodStatus) {
			c := s.ContainerStatuses[0]
			if c.RestartCount != 1 || c.ContainerID != "containerd://c2" || c.LastTerminationState.Terminated == nil || c.LastTerminationState.Terminated.ExitCode != 2 {
				t.Errorf("container status = %+v", c)
			}
		},
	}, {
		name: "was running, now gone from the runtime: lastState 137 ContainerStatusUnknown",
		pod:  specPod(v1.RestartPolicyAlways, "main"), rs: runtimeStatus(nil, nil), old: runningStatus,
		phase: v1.PodRunning, state: "Running [main waiting ContainerCreating]",
		ready: "False/ContainersNotReady", containersReady: "False/ContainersNotReady", initialized: "True", readyToRun: "False",
		check: func(t *testing.T, s v1.PodStatus) {
			c := s.ContainerStatuses[0]
			lt := c.LastTerminationState.Terminated
			if lt == nil || lt.ExitCode != 137 || lt.Reason != kubecontainer.ContainerReasonStatusUnknown || c.RestartCount != 1 {
				t.Errorf("container status = %+v", c)
			}
		},
	}, {
		name: "a terminal phase in the last status stays, whatever the runtime says",
		pod:  specPod(v1.RestartPolicyNever, "main"), rs: runtimeStatus(nil, nil),
		old: v1.PodStatus{Phase: v1.PodSucceeded, Reason: "Done", ContainerStatuses: []v1.ContainerStatus{{Name: "main",
			State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}},
		phase: v1.PodSucceeded, state: "Succeeded [main exited 0 Completed]",
		ready: "False/PodCompleted", containersReady: "False/PodCompleted", initialized: "True/PodCompleted", readyToRun: "False",
		check: func(t *testing.T, s v1.PodStatus) {
			if s.Reason != "Done" {
				t.Errorf("reason = %q, want the old phase's reason kept", s.Reason)
			}
		},
	}, {
		name: "an init container has not run: Pending, PodInitializing",
		pod: func() *v1.Pod {
			p := specPod(v1.RestartPolicyNever, "main")
			p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox"}}
			return p
		}(),
		rs:    runtimeStatus([]string{"10.88.0.5"}, []*runtimeapi.PodSandboxStatus{sandbox("10.88.0.5")}, running("init", "i1", 0)),
		phase: v1.PodPending, state: "Pending [init running, main waiting PodInitializing]", podIP: "10.88.0.5",
		ready: "False/ContainersNotReady", containersReady: "False/ContainersNotReady", initialized: "False/ContainersNotInitialized", readyToRun: "True",
	}, {
		name: "a host-network pod has the node's IPs",
		pod: func() *v1.Pod {
			p := specPod(v1.RestartPolicyNever, "main")
			p.Spec.HostNetwork = true
			return p
		}(),
		rs: runtimeStatus(nil, nil, running("main", "c1", 0)), hostIPs: []string{"192.168.5.15", "fd00::15"},
		phase: v1.PodRunning, state: "Running [main running ready]", podIP: "192.168.5.15", hostIP: "192.168.5.15",
		ready: "True", containersReady: "True", initialized: "True", readyToRun: "False",
		check: func(t *testing.T, s v1.PodStatus) {
			if len(s.PodIPs) != 2 || s.PodIPs[1].IP != "fd00::15" || len(s.HostIPs) != 2 {
				t.Errorf("podIPs %v hostIPs %v", s.PodIPs, s.HostIPs)
			}
		},
	}, {
		name: "an IPv6 node lists the pod's IPv6 address first",
		pod:  specPod(v1.RestartPolicyNever, "main"),
		rs:   runtimeStatus([]string{"10.88.0.5", "fd00::5"}, []*runtimeapi.PodSandboxStatus{sandbox("10.88.0.5")}, running("main", "c1", 0)), hostIPs: []string{"fd00::15"},
		phase: v1.PodRunning, state: "Running [main running ready]", podIP: "fd00::5", hostIP: "fd00::15",
		ready: "True", containersReady: "True", initialized: "True", readyToRun: "True",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := Generate(tc.pod, tc.rs, tc.old, tc.terminal, GenerateOptions{HostIPs: tc.hostIPs})
			if s.Phase != tc.phase {
				t.Errorf("phase = %s, want %s", s.Phase, tc.phase)
			}
			if got := Describe(s); got != tc.state {
				t.Errorf("status = %q, want %q", got, tc.state)
			}
			if s.PodIP != tc.podIP || s.HostIP != tc.hostIP {
				t.Errorf("podIP %q hostIP %q, want %q %q", s.PodIP, s.HostIP, tc.podIP, tc.hostIP)
			}
			for _, c := range []struct {
				t    v1.PodConditionType
				want string
			}{{v1.PodReady, tc.ready}, {v1.ContainersReady, tc.containersReady}, {v1.PodInitialized, tc.initialized},
				{v1.PodReadyToStartContainers, tc.readyToRun}, {v1.PodScheduled, "True"}} {
				if got := condition(s, c.t); got != c.want {
					t.Errorf("condition %s = %s, want %s", c.t, got, c.want)
				}
			}
			if tc.check != nil {
				tc.check(t, s)
			}
		})
	}
}

// probes marks every container started but not ready, as a readiness
// probe that has not passed yet.
type probes struct{}

func (probes) UpdatePodStatus(_ *v1.Pod, s *v1.PodStatus) {
	for i := range s.ContainerStatuses {
		started := true
		s.ContainerStatuses[i].Started = &started
		s.ContainerStatuses[i].Ready = false
	}
}

func TestGenerateAsksTheProbes(t *testing.T) {
	pod := specPod(v1.RestartPolicyAlways, "main")
	rs := runtimeStatus([]string{"10.88.0.5"}, []*runtimeapi.PodSandboxStatus{sandbox("10.88.0.5")}, running("main", "c1", 0))
	s := Generate(pod, rs, v1.PodStatus{}, false, GenerateOptions{Probes: probes{}})
	if s.Phase != v1.PodRunning || s.ContainerStatuses[0].Ready || condition(s, v1.PodReady) != "False/ContainersNotReady" {
		t.Errorf("with a readiness probe not passed: %s, Ready condition %s", Describe(s), condition(s, v1.PodReady))
	}
}

func TestGenerateKeepsOtherConditions(t *testing.T) {
	pod := specPod(v1.RestartPolicyAlways, "main")
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb"}}
	pod.Status.Conditions = []v1.PodCondition{{Type: "example.com/lb", Status: v1.ConditionFalse}}
	rs := runtimeStatus([]string{"10.88.0.5"}, []*runtimeapi.PodSandboxStatus{sandbox("10.88.0.5")}, running("main", "c1", 0))
	s := Generate(pod, rs, v1.PodStatus{}, false, GenerateOptions{})
	if got := condition(s, "example.com/lb"); got != "False" {
		t.Errorf("a condition set by a controller: %s, want it kept", got)
	}
	if got := condition(s, v1.PodReady); got != "False/ReadinessGatesNotReady" {
		t.Errorf("Ready = %s, want False/ReadinessGatesNotReady (the gate is not met)", got)
	}
}
