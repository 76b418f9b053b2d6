package kuberuntime_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/mycore/kuberuntime"
)

// The mapping needs no runtime: ContainerConfig and SandboxConfig are pure
// (the image's user is an argument), so these tests run with no CRI client.

func secPod(psc *v1.PodSecurityContext, csc *v1.SecurityContext) (*v1.Pod, *v1.Container) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"},
		Spec: v1.PodSpec{SecurityContext: psc, Containers: []v1.Container{
			{Name: "app", Image: "busybox", SecurityContext: csc},
		}},
	}
	return pod, &pod.Spec.Containers[0]
}

func i64(v int64) *int64 { return &v }
func boolp(v bool) *bool { return &v }

var rootImage = kuberuntime.ImageUser{UID: i64(0)}

func containerSC(t *testing.T, m *kuberuntime.Manager, pod *v1.Pod, c *v1.Container, user kuberuntime.ImageUser) *runtimeapi.LinuxContainerSecurityContext {
	t.Helper()
	cfg, err := m.ContainerConfig(pod, c, 0, kuberuntime.PodIPs{}, user)
	if err != nil {
		t.Fatalf("ContainerConfig: %v", err)
	}
	return cfg.GetLinux().GetSecurityContext()
}

// Each field of the pod's and the container's securityContext lands in the
// CRI field upstream puts it in (security_context.go), the container's
// overriding the pod's.
func TestContainerSecurityContextMapping(t *testing.T) {
	m := kuberuntime.New(nil, kuberuntime.Options{})

	t.Run("nothing set", func(t *testing.T) {
		pod, c := secPod(nil, nil)
		sc := containerSC(t, m, pod, c, rootImage)
		if sc.GetRunAsUser().GetValue() != 0 || sc.RunAsUser == nil {
			t.Errorf("RunAsUser %v, want the image's 0", sc.RunAsUser)
		}
		if sc.Privileged || sc.ReadonlyRootfs || sc.NoNewPrivs || sc.Capabilities != nil || sc.RunAsGroup != nil || len(sc.SupplementalGroups) > 0 {
			t.Errorf("restrictions nobody asked for: %v", sc)
		}
		if sc.GetSeccomp().GetProfileType() != runtimeapi.SecurityProfile_Unconfined {
			t.Errorf("seccomp %v, want Unconfined (the kubelet's seccompDefault: false)", sc.Seccomp)
		}
		if !slices.Contains(sc.MaskedPaths, "/proc/kcore") || !slices.Contains(sc.ReadonlyPaths, "/proc/sys") {
			t.Errorf("masked %v, read-only %v: want the default paths", sc.MaskedPaths, sc.ReadonlyPaths)
		}
		if sc.GetNamespaceOptions().GetPid() != runtimeapi.NamespaceMode_CONTAINER {
			t.Errorf("namespace options %v", sc.NamespaceOptions)
		}
	})

	t.Run("pod level", func(t *testing.T) {
		strict := v1.SupplementalGroupsPolicyStrict
		pod, c := secPod(&v1.PodSecurityContext{
			RunAsUser: i64(1000), RunAsGroup: i64(2000), FSGroup: i64(3000), SupplementalGroups: []int64{4000, 4001},
			SupplementalGroupsPolicy: &strict,
			SeccompProfile:           &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault},
		}, nil)
		pod.Spec.HostPID = true
		sc := containerSC(t, m, pod, c, rootImage)
		if sc.GetRunAsUser().GetValue() != 1000 || sc.GetRunAsGroup().GetValue() != 2000 {
			t.Errorf("RunAsUser %v RunAsGroup %v, want 1000 2000", sc.RunAsUser, sc.RunAsGroup)
		}
		if !slices.Equal(sc.SupplementalGroups, []int64{3000, 4000, 4001}) || sc.SupplementalGroupsPolicy != runtimeapi.SupplementalGroupsPolicy_Strict {
			t.Errorf("groups %v policy %v, want fsGroup then supplementalGroups, Strict", sc.SupplementalGroups, sc.SupplementalGroupsPolicy)
		}
		if sc.GetSeccomp().GetProfileType() != runtimeapi.SecurityProfile_RuntimeDefault {
			t.Errorf("seccomp %v, want RuntimeDefault", sc.Seccomp)
		}
		if sc.GetNamespaceOptions().GetPid() != runtimeapi.NamespaceMode_NODE {
			t.Errorf("hostPID lost: %v", sc.NamespaceOptions)
		}
	})

	t.Run("container overrides pod", func(t *testing.T) {
		pod, c := secPod(&v1.PodSecurityContext{
			RunAsUser: i64(1000), RunAsGroup: i64(2000),
			SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault},
		}, &v1.SecurityContext{
			RunAsUser: i64(1001), RunAsGroup: i64(2001),
			Capabilities:             &v1.Capabilities{Add: []v1.Capability{"NET_BIND_SERVICE"}, Drop: []v1.Capability{"ALL"}},
			Privileged:               boolp(true),
			ReadOnlyRootFilesystem:   boolp(true),
			AllowPrivilegeEscalation: boolp(false),
			SeccompProfile:           &v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined},
			ProcMount:                func() *v1.ProcMountType { p := v1.DefaultProcMount; return &p }(),
		})
		sc := containerSC(t, m, pod, c, rootImage)
		if sc.GetRunAsUser().GetValue() != 1001 || sc.GetRunAsGroup().GetValue() != 2001 {
			t.Errorf("RunAsUser %v RunAsGroup %v, want the container's 1001 2001", sc.RunAsUser, sc.RunAsGroup)
		}
		if !slices.Equal(sc.GetCapabilities().GetAddCapabilities(), []string{"NET_BIND_SERVICE"}) || !slices.Equal(sc.GetCapabilities().GetDropCapabilities(), []string{"ALL"}) {
			t.Errorf("capabilities %v", sc.Capabilities)
		}
		if !sc.Privileged || !sc.ReadonlyRootfs || !sc.NoNewPrivs {
			t.Errorf("privileged %v readonlyRootfs %v noNewPrivs %v, want all true", sc.Privileged, sc.ReadonlyRootfs, sc.NoNewPrivs)
		}
		if sc.GetSeccomp().GetProfileType() != runtimeapi.SecurityProfile_Unconfined {
			t.Errorf("seccomp %v, want the container's Unconfined", sc.Seccomp)
		}
	})

	t.Run("image user", func(t *testing.T) {
		pod, c := secPod(nil, nil)
		if sc := containerSC(t, m, pod, c, kuberuntime.ImageUser{UID: i64(1234)}); sc.GetRunAsUser().GetValue() != 1234 {
			t.Errorf("RunAsUser %v, want the image's 1234", sc.RunAsUser)
		}
		if sc := containerSC(t, m, pod, c, kuberuntime.ImageUser{Name: "nobody"}); sc.RunAsUser != nil || sc.RunAsUsername != "nobody" {
			t.Errorf("RunAsUser %v RunAsUsername %q, want the image's name only", sc.RunAsUser, sc.RunAsUsername)
		}
	})

	t.Run("seccomp Localhost", func(t *testing.T) {
		profile := "profiles/audit.json"
		pod, c := secPod(&v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: &profile}}, nil)
		if _, err := m.ContainerConfig(pod, c, 0, kuberuntime.PodIPs{}, rootImage); err == nil || !strings.Contains(err.Error(), "SeccompProfileRoot") {
			t.Errorf("without a profile folder: %v, want a refusal naming SeccompProfileRoot", err)
		}
		withRoot := kuberuntime.New(nil, kuberuntime.Options{SeccompProfileRoot: "/var/lib/kubelet/seccomp"})
		sc := containerSC(t, withRoot, pod, c, rootImage)
		if sc.GetSeccomp().GetProfileType() != runtimeapi.SecurityProfile_Localhost || sc.GetSeccomp().GetLocalhostRef() != "/var/lib/kubelet/seccomp/profiles/audit.json" {
			t.Errorf("seccomp %v", sc.Seccomp)
		}
		escape := "../../etc/x.json"
		pod.Spec.SecurityContext.SeccompProfile.LocalhostProfile = &escape
		if _, err := withRoot.ContainerConfig(pod, c, 0, kuberuntime.PodIPs{}, rootImage); err == nil {
			t.Errorf("a profile outside the folder was accepted")
		}
	})
}

// The sandbox gets the pod-level user and groups, RuntimeDefault seccomp
// whatever the pod says, and is privileged when a container is.
func TestSandboxSecurityContextMapping(t *testing.T) {
	m := kuberuntime.New(nil, kuberuntime.Options{})
	pod, _ := secPod(&v1.PodSecurityContext{
		RunAsUser: i64(1000), RunAsGroup: i64(2000), FSGroup: i64(3000), SupplementalGroups: []int64{4000},
		SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined},
	}, &v1.SecurityContext{Privileged: boolp(true)})
	sc := sandboxConfig(t, m, pod).GetLinux().GetSecurityContext()
	if sc.GetRunAsUser().GetValue() != 1000 || sc.GetRunAsGroup().GetValue() != 2000 {
		t.Errorf("RunAsUser %v RunAsGroup %v", sc.RunAsUser, sc.RunAsGroup)
	}
	if !slices.Equal(sc.SupplementalGroups, []int64{3000, 4000}) {
		t.Errorf("groups %v", sc.SupplementalGroups)
	}
	if !sc.Privileged {
		t.Errorf("sandbox not privileged with a privileged container")
	}
	if sc.GetSeccomp().GetProfileType() != runtimeapi.SecurityProfile_RuntimeDefault {
		t.Errorf("sandbox seccomp %v, want RuntimeDefault", sc.Seccomp)
	}
	plain, _ := secPod(nil, nil)
	if sc := sandboxConfig(t, m, plain).GetLinux().GetSecurityContext(); sc.Privileged || sc.RunAsUser != nil {
		t.Errorf("plain pod's sandbox: %v", sc)
	}
}

// What this node does not map is refused with a reason naming the field,
// never run without it.
func TestUnsupportedSecurityContextRefused(t *testing.T) {
	m := kuberuntime.New(nil, kuberuntime.Options{})
	unmasked := v1.UnmaskedProcMount
	for _, tc := range []struct {
		name string
		psc  *v1.PodSecurityContext
		csc  *v1.SecurityContext
		edit func(*v1.Pod)
		want string
	}{
		{"pod appArmorProfile", &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}, nil, nil, "appArmorProfile"},
		{"container appArmorProfile", nil, &v1.SecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}}, nil, "appArmorProfile"},
		{"apparmor annotation", nil, nil, func(p *v1.Pod) {
			p.Annotations = map[string]string{v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "app": "runtime/default"}
		}, "AppArmor annotation"},
		{"procMount Unmasked", nil, &v1.SecurityContext{ProcMount: &unmasked}, nil, "procMount: Unmasked"},
		{"hostUsers false", nil, nil, func(p *v1.Pod) { p.Spec.HostUsers = boolp(false) }, "hostUsers"},
		{"unknown supplementalGroupsPolicy", &v1.PodSecurityContext{SupplementalGroupsPolicy: func() *v1.SupplementalGroupsPolicy { p := v1.SupplementalGroupsPolicy("Loose"); return &p }()}, nil, nil, "supplementalGroupsPolicy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, c := secPod(tc.psc, tc.csc)
			if tc.edit != nil {
				tc.edit(pod)
			}
			_, err := m.ContainerConfig(pod, c, 0, kuberuntime.PodIPs{}, rootImage)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "container app") {
				t.Errorf("err %v, want a refusal of container app naming %q", err, tc.want)
			}
		})
	}
}

// windowsOptions are Windows's: a Linux kubelet ignores them
// (kuberuntime_sandbox.go:144-150), it does not refuse the pod. The e2e
// suite's registry pod (test/e2e/framework/registry/registry.go:126-129)
// sets them, with hostProcess, on every OS; a node that refused them
// failed the four image-pull specs of the node suite.
func TestWindowsOptionsAreIgnoredOnLinux(t *testing.T) {
	m := kuberuntime.New(nil, kuberuntime.Options{})
	win := &v1.WindowsSecurityContextOptions{RunAsUserName: ptrString("NT AUTHORITY\\SYSTEM"), HostProcess: boolp(true)}
	pod, c := secPod(&v1.PodSecurityContext{WindowsOptions: win}, &v1.SecurityContext{WindowsOptions: win})
	cfg, err := m.ContainerConfig(pod, c, 0, kuberuntime.PodIPs{}, rootImage)
	if err != nil {
		t.Fatalf("a pod with windowsOptions: %v, want it run (a Linux kubelet ignores them)", err)
	}
	if cfg.GetWindows() != nil {
		t.Errorf("container config carries Windows settings %v, want none on Linux", cfg.GetWindows())
	}
}

func ptrString(s string) *string { return &s }

// SELinux labels go to the runtime, as the real kubelet sends them
// (security_context.go:106, kuberuntime_sandbox.go:220-227): the
// container's own over the pod's, the pod's on the sandbox. The runtime
// applies them where SELinux is on; the conformance specs of subPath set
// them on every pod, so a node that refused them failed those specs.
func TestSELinuxOptionsReachTheRuntime(t *testing.T) {
	m := kuberuntime.New(nil, kuberuntime.Options{})
	pod, c := secPod(&v1.PodSecurityContext{SELinuxOptions: &v1.SELinuxOptions{Level: "s0:c0,c1"}}, nil)
	cfg, err := m.ContainerConfig(pod, c, 0, kuberuntime.PodIPs{}, rootImage)
	if err != nil {
		t.Fatalf("a pod with seLinuxOptions: %v", err)
	}
	if got := cfg.GetLinux().GetSecurityContext().GetSelinuxOptions(); got.GetLevel() != "s0:c0,c1" {
		t.Errorf("container's SELinux option %v, want the pod's level s0:c0,c1", got)
	}
	sb, err := m.SandboxConfig(context.Background(), pod, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := sb.GetLinux().GetSecurityContext().GetSelinuxOptions(); got.GetLevel() != "s0:c0,c1" {
		t.Errorf("sandbox's SELinux option %v, want the pod's level s0:c0,c1", got)
	}
	pod, c = secPod(&v1.PodSecurityContext{SELinuxOptions: &v1.SELinuxOptions{Level: "s0:c0,c1"}}, &v1.SecurityContext{SELinuxOptions: &v1.SELinuxOptions{Type: "spc_t"}})
	cfg, err = m.ContainerConfig(pod, c, 0, kuberuntime.PodIPs{}, rootImage)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.GetLinux().GetSecurityContext().GetSelinuxOptions(); got.GetType() != "spc_t" || got.GetLevel() != "" {
		t.Errorf("container's SELinux option %v, want the container's own (type spc_t) over the pod's", got)
	}
}

// runAsNonRoot as verifyRunAsNonRoot (security_context_others.go:34-69)
// decides it: the effective runAsUser if set, else the image's user, which
// must be a numeric UID other than 0.
func TestRunAsNonRoot(t *testing.T) {
	m := kuberuntime.New(nil, kuberuntime.Options{})
	for _, tc := range []struct {
		name string
		psc  *v1.PodSecurityContext
		csc  *v1.SecurityContext
		user kuberuntime.ImageUser
		want string // "" = allowed
	}{
		{"not asked", nil, nil, rootImage, ""},
		{"root image", &v1.PodSecurityContext{RunAsNonRoot: boolp(true)}, nil, rootImage, "image will run as root"},
		{"runAsUser 0", nil, &v1.SecurityContext{RunAsNonRoot: boolp(true), RunAsUser: i64(0)}, kuberuntime.ImageUser{UID: i64(1000)}, "runAsUser breaks non-root policy"},
		{"runAsUser over a root image", &v1.PodSecurityContext{RunAsNonRoot: boolp(true)}, &v1.SecurityContext{RunAsUser: i64(1000)}, rootImage, ""},
		{"image uid 1000", nil, &v1.SecurityContext{RunAsNonRoot: boolp(true)}, kuberuntime.ImageUser{UID: i64(1000)}, ""},
		{"image user name", nil, &v1.SecurityContext{RunAsNonRoot: boolp(true)}, kuberuntime.ImageUser{Name: "app"}, "non-numeric user (app)"},
		{"image uid out of range", nil, &v1.SecurityContext{RunAsNonRoot: boolp(true)}, kuberuntime.ImageUser{UID: i64(1 << 32)}, "invalid user id"},
		{"container allows what the pod forbids", &v1.PodSecurityContext{RunAsNonRoot: boolp(true)}, &v1.SecurityContext{RunAsNonRoot: boolp(false)}, rootImage, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, c := secPod(tc.psc, tc.csc)
			_, err := m.ContainerConfig(pod, c, 0, kuberuntime.PodIPs{}, tc.user)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// A pod's sysctls go to its sandbox with dots as separators (runc refuses
// "kernel/shm_rmid_forced"); a pod without any asks for none.
func TestSandboxSysctls(t *testing.T) {
	m := kuberuntime.New(nil, kuberuntime.Options{})
	pod, c := secPod(&v1.PodSecurityContext{Sysctls: []v1.Sysctl{
		{Name: "kernel/shm_rmid_forced", Value: "1"},
		{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"},
	}}, nil)
	got := sandboxConfig(t, m, pod).GetLinux().GetSysctls()
	want := map[string]string{"kernel.shm_rmid_forced": "1", "net.ipv4.ip_unprivileged_port_start": "0"}
	if !maps.Equal(got, want) {
		t.Errorf("sandbox sysctls %v, want %v", got, want)
	}
	if _, err := m.ContainerConfig(pod, c, 0, kuberuntime.PodIPs{}, rootImage); err != nil {
		t.Errorf("a pod with sysctls is refused: %v", err)
	}
	plain, _ := secPod(nil, nil)
	if got := sandboxConfig(t, m, plain).GetLinux().GetSysctls(); len(got) != 0 {
		t.Errorf("a pod without sysctls: sandbox sysctls %v", got)
	}
}
