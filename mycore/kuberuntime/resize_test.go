package kuberuntime

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

// A running container whose spec asks for other resources than the runtime
// reports is resized in place, or restarted if its resizePolicy says so
// for a resource that changed; nothing is done when they agree, or when the
// runtime reports nothing (containerd 1.6).
func TestComputeResize(t *testing.T) {
	q := resource.MustParse
	spec := func(cpuLim, mem string, policy v1.ResourceResizeRestartPolicy) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-r"}, Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "app", Image: "busybox",
			Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: q("20m"), v1.ResourceMemory: q(mem)},
				Limits:   v1.ResourceList{v1.ResourceCPU: q(cpuLim), v1.ResourceMemory: q(mem)},
			},
			ResizePolicy: []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: policy}},
		}}}}
	}
	reported := func(cpuLim, mem string) *kubecontainer.ContainerResources {
		l, m, r := q(cpuLim), q(mem), q("20m")
		return &kubecontainer.ContainerResources{CPURequest: &r, CPULimit: &l, MemoryLimit: &m}
	}
	tests := []struct {
		name     string
		pod      *v1.Pod
		have     *kubecontainer.ContainerResources
		describe string
		update   bool
		restart  bool
	}{
		{"same: nothing", spec("30m", "45Mi", v1.NotRequired), reported("30m", "45Mi"), "nothing to do", false, false},
		{"more CPU: in place", spec("35m", "45Mi", v1.RestartContainer), reported("30m", "45Mi"), "resize app in place", true, false},
		{"more memory, NotRequired: in place", spec("30m", "50Mi", v1.NotRequired), reported("30m", "45Mi"), "resize app in place", true, false},
		{"more memory, RestartContainer: restart", spec("30m", "50Mi", v1.RestartContainer), reported("30m", "45Mi"), "kill app (Container app resize requires restart); start app", false, true},
		{"the runtime reports nothing: nothing", spec("35m", "50Mi", v1.NotRequired), nil, "nothing to do", false, false},
	}
	// For the compute-pod-actions stage: where a learner's containerActions
	// must hand a kept running container to the resize decision.
	const why = "a running container with the same spec hash and no failed probe goes to computePodResizeAction, which updates it in place or restarts it (kuberuntime_manager.go:1351-1353, v1.36.3): call m.computeResize"
	m := New(nil, Options{MemoryCapacity: 8 << 30})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := &kubecontainer.PodStatus{ID: tt.pod.UID, Name: "p", Namespace: "ns",
				SandboxStatuses: []*runtimeapi.PodSandboxStatus{{
					Id: "sb1", State: runtimeapi.PodSandboxState_SANDBOX_READY, Metadata: &runtimeapi.PodSandboxMetadata{},
					Network: &runtimeapi.PodSandboxNetworkStatus{Ip: "10.0.0.2"},
					Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{
						Network: runtimeapi.NamespaceMode_POD}}},
				}},
				ContainerStatuses: []*kubecontainer.Status{{
					ID: kubecontainer.ContainerID{Type: "containerd", ID: "app-id"}, Name: "app", State: kubecontainer.ContainerStateRunning,
					Hash: kubecontainer.HashContainer(&tt.pod.Spec.Containers[0]), Resources: tt.have,
				}},
			}
			a := m.ComputePodActions(tt.pod, ps)
			if d := a.Describe(tt.pod); !strings.Contains(d, tt.describe) {
				t.Errorf("Describe: %q, want %q: %s", d, tt.describe, why)
			}
			if got := len(a.ContainersToUpdate) == 1; got != tt.update {
				t.Errorf("containers to update %v, want an update: %v: %s", a.ContainersToUpdate, tt.update, why)
			}
			if _, got := a.ContainersToKill[ps.ContainerStatuses[0].ID]; got != tt.restart || (len(a.ContainersToStart) == 1) != tt.restart {
				t.Errorf("kill %v, start %v; want a restart: %v: %s", a.ContainersToKill, a.ContainersToStart, tt.restart, why)
			}
			if tt.update != m.ResizeInProgress(tt.pod, ps) && !tt.restart {
				t.Errorf("ResizeInProgress %v, want %v", !tt.update, tt.update)
			}
		})
	}
}
