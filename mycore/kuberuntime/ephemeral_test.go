package kuberuntime

import (
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

// An ephemeral container (kubectl debug) starts once the pod has a
// sandbox — even while an init container still runs — and never again.
func TestEphemeralContainerActions(t *testing.T) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-e"},
		Spec: v1.PodSpec{
			InitContainers:      []v1.Container{{Name: "init", Image: "busybox"}},
			Containers:          []v1.Container{{Name: "app", Image: "busybox"}},
			EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger", Image: "busybox"}}},
		},
	}
	sandbox := []*runtimeapi.PodSandboxStatus{{
		Id: "sb1", State: runtimeapi.PodSandboxState_SANDBOX_READY, Metadata: &runtimeapi.PodSandboxMetadata{},
		Network: &runtimeapi.PodSandboxNetworkStatus{Ip: "10.0.0.2"},
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{
			Network: runtimeapi.NamespaceMode_POD}}},
	}}
	ctr := func(name string, st kubecontainer.State) *kubecontainer.Status {
		return &kubecontainer.Status{ID: kubecontainer.ContainerID{Type: "containerd", ID: name + "-id"}, Name: name, State: st,
			Hash: kubecontainer.HashContainer(&v1.Container{Name: name, Image: "busybox"})}
	}
	tests := []struct {
		name       string
		sandboxes  []*runtimeapi.PodSandboxStatus
		containers []*kubecontainer.Status
		want       []int
		describe   string
	}{
		{"running pod: the new ephemeral container starts", sandbox,
			[]*kubecontainer.Status{ctr("app", kubecontainer.ContainerStateRunning), ctr("init", kubecontainer.ContainerStateExited)},
			[]int{0}, "start ephemeral debugger"},
		{"still initializing: it starts all the same", sandbox,
			[]*kubecontainer.Status{ctr("init", kubecontainer.ContainerStateRunning)},
			[]int{0}, "start ephemeral debugger"},
		{"it exited: never started again", sandbox,
			[]*kubecontainer.Status{ctr("debugger", kubecontainer.ContainerStateExited), ctr("app", kubecontainer.ContainerStateRunning), ctr("init", kubecontainer.ContainerStateExited)},
			nil, "nothing to do"},
		{"no sandbox: a new one does not bring it back", nil,
			[]*kubecontainer.Status{ctr("app", kubecontainer.ContainerStateExited)},
			nil, "create the sandbox"},
	}
	m := New(nil, Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := &kubecontainer.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace, SandboxStatuses: tt.sandboxes, ContainerStatuses: tt.containers}
			a := m.ComputePodActions(pod, ps)
			if !slices.Equal(a.EphemeralContainersToStart, tt.want) {
				t.Errorf("ephemeral containers to start %v, want %v", a.EphemeralContainersToStart, tt.want)
			}
			if d := a.Describe(pod); !strings.Contains(d, tt.describe) {
				t.Errorf("Describe: %q, want it to contain %q", d, tt.describe)
			}
		})
	}
}

// kubectl debug --target=app: the debugger joins app's PID namespace.
func TestEphemeralContainerTargetsAContainersPIDNamespace(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{
		Containers: []v1.Container{{Name: "app"}},
		EphemeralContainers: []v1.EphemeralContainer{
			{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger"}, TargetContainerName: "app"},
			{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "plain"}},
			{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "lost"}, TargetContainerName: "gone"},
		},
	}}
	ps := &kubecontainer.PodStatus{ContainerStatuses: []*kubecontainer.Status{{ID: kubecontainer.ContainerID{Type: "containerd", ID: "app-id"}, Name: "app"}}}
	config := func() *runtimeapi.ContainerConfig {
		return &runtimeapi.ContainerConfig{Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER}}}}
	}
	ec := func(i int) *v1.Container {
		return (*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
	}

	cfg := config()
	if err := targetNamespace(pod, ec(0), ps, cfg); err != nil {
		t.Fatal(err)
	}
	if ns := cfg.Linux.SecurityContext.NamespaceOptions; ns.Pid != runtimeapi.NamespaceMode_TARGET || ns.TargetId != "app-id" {
		t.Errorf("debugger --target=app: pid namespace %s, target %q; want TARGET, app-id", ns.Pid, ns.TargetId)
	}
	cfg = config()
	if err := targetNamespace(pod, ec(1), ps, cfg); err != nil || cfg.Linux.SecurityContext.NamespaceOptions.Pid != runtimeapi.NamespaceMode_CONTAINER {
		t.Errorf("no target: %v, pid namespace %s; want its own (CONTAINER)", err, cfg.Linux.SecurityContext.NamespaceOptions.Pid)
	}
	if err := targetNamespace(pod, ec(2), ps, config()); err == nil {
		t.Errorf("a target that does not exist: no error")
	}
	shared := config()
	shared.Linux.SecurityContext.NamespaceOptions.Pid = runtimeapi.NamespaceMode_POD
	if err := targetNamespace(pod, ec(0), ps, shared); err != nil || shared.Linux.SecurityContext.NamespaceOptions.Pid != runtimeapi.NamespaceMode_POD {
		t.Errorf("shareProcessNamespace: %v, pid namespace %s; want POD, unchanged", err, shared.Linux.SecurityContext.NamespaceOptions.Pid)
	}
}
