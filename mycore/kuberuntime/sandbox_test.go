package kuberuntime_test

import (
	"context"
	"maps"
	"testing"

	v1 "k8s.io/api/core/v1"

	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/kuberuntime"
	"kubelet-labs/mylib/fakecri"
)

// mockManager is our runtime manager on a mock runtime in this process
// (no socket), made with opts.
func mockManager(t *testing.T, opts ...fakecri.Option) (*kuberuntime.Manager, *cri.Client) {
	t.Helper()
	noLeaks(t)
	mock := fakecri.New(opts...)
	t.Cleanup(mock.Close)
	c := cri.InProcess("mock", mock, mock)
	return kuberuntime.New(c, kuberuntime.Options{PodLogsDir: t.TempDir()}), c
}

// The pod's sysctls reach the runtime: the RunPodSandbox request carries
// them, dot-separated, and the sandbox's inspect (crictl inspectp:
// info.config.linux.sysctls) shows them — a pod never runs with them
// silently dropped (generatePodSandboxLinuxConfig,
// kuberuntime_sandbox.go:178-185).
func TestSandboxTheRuntimeGetsCarriesSysctls(t *testing.T) {
	m, c := mockManager(t)
	ctx := context.Background()
	pod := killPod("sysctls", 1)
	pod.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{
		{Name: "kernel/shm_rmid_forced", Value: "1"},
		{Name: "net.ipv4.ip_unprivileged_port_start", Value: "80"},
	}}
	id, err := m.CreateSandbox(ctx, pod, 0)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Runtime.PodSandboxStatus(c.Context(ctx), id, true)
	if err != nil {
		t.Fatal(err)
	}
	sysctls, err := fakecri.SandboxSysctls(resp.GetInfo())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"kernel.shm_rmid_forced": "1", "net.ipv4.ip_unprivileged_port_start": "80"}
	if got := sysctls; !maps.Equal(got, want) {
		t.Errorf("the runtime's sandbox has sysctls %v, want the pod's %v", got, want)
	}
}

// RuntimeFeatures is what the runtime's CRI Status says it implements:
// containerd 2.x (the mock's default) has supplementalGroupsPolicy,
// containerd 1.6 does not.
func TestRuntimeFeatures(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  fakecri.Option
		want bool
	}{
		{"containerd 2.x", fakecri.WithSupplementalGroupsPolicy(true), true},
		{"containerd 1.6", fakecri.WithSupplementalGroupsPolicy(false), false},
	} {
		m, _ := mockManager(t, tc.opt)
		f, err := m.RuntimeFeatures(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if f == nil || f.SupplementalGroupsPolicy != tc.want {
			t.Errorf("%s: features %v, want supplementalGroupsPolicy %v", tc.name, f, tc.want)
		}
	}
}
