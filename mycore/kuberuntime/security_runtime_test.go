package kuberuntime_test

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"kubelet-labs/mycore/kuberuntime"
)

// What a pod's securityContext asks for is what the container gets: a
// restricted container runs as uid 1000 with no effective capabilities, a
// read-only root filesystem refuses a write that the same image allows
// without it, /proc/sys is read-only (the default read-only paths), and
// the pod's sysctl is set in its namespaces.
// The mock runs no processes: there only the uid is checked (its `id`
// reports the config's runAsUser), and that it accepts the fields.
func TestSecurityContextOnRuntime(t *testing.T) {
	eachRuntime(t, func(t *testing.T, e *killEnv) {
		const script = `echo ready; while true; do sleep 1; done`
		uid, no := int64(1000), false
		yes := true
		restricted := ctr("restricted", script)
		restricted.SecurityContext = &v1.SecurityContext{
			RunAsUser:                &uid,
			AllowPrivilegeEscalation: &no,
			Capabilities:             &v1.Capabilities{Drop: []v1.Capability{"ALL"}},
		}
		readonly := ctr("readonly", script)
		readonly.SecurityContext = &v1.SecurityContext{ReadOnlyRootFilesystem: &yes}
		pod := killPod("secctx", 1, restricted, readonly, ctr("writable", script))
		// a safe sysctl, named with slashes as a pod may (sandboxSysctls)
		pod.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel/shm_rmid_forced", Value: "1"}}}
		_, ids := e.start(t, pod)

		exec := func(name string, cmd ...string) (string, int) {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := e.cri.Exec(ctx, ids[name], cmd, 20*time.Second)
			if err != nil {
				t.Fatalf("exec %v in %s: %v", cmd, name, err)
			}
			return strings.TrimSpace(string(res.Stdout) + string(res.Stderr)), res.ExitCode
		}

		if !e.rt.Real {
			if out, _ := exec("restricted", "id"); !strings.Contains(out, "uid=1000") {
				t.Errorf("id in restricted: %q, want uid=1000", out)
			}
			return
		}
		if out, _ := exec("restricted", "id", "-u"); out != "1000" {
			t.Errorf("id -u in restricted: %q, want 1000 (runAsUser)", out)
		}
		if out, _ := exec("restricted", "grep", "-E", "^(CapEff|NoNewPrivs):", "/proc/self/status"); !strings.Contains(out, "CapEff:\t0000000000000000") || !strings.Contains(out, "NoNewPrivs:\t1") {
			t.Errorf("/proc/self/status in restricted:\n%s\nwant CapEff 0 (drop ALL) and NoNewPrivs 1 (allowPrivilegeEscalation: false)", out)
		}
		if out, code := exec("writable", "grep", "-E", "^CapEff:", "/proc/self/status"); code != 0 || strings.Contains(out, "0000000000000000") {
			t.Errorf("CapEff in writable: %q (exit %d), want the runtime's default set", out, code)
		}
		if out, _ := exec("writable", "cat", "/proc/sys/kernel/shm_rmid_forced"); out != "1" {
			t.Errorf("kernel.shm_rmid_forced in the pod: %q, want 1 (the pod's sysctl)", out)
		}
		if out, code := exec("readonly", "touch", "/probe"); code == 0 || !strings.Contains(out, "Read-only file system") {
			t.Errorf("touch /probe in readonly: exit %d %q, want Read-only file system", code, out)
		}
		if out, code := exec("writable", "touch", "/probe"); code != 0 {
			t.Errorf("touch /probe in writable: exit %d %q, want success", code, out)
		}
		if out, _ := exec("writable", "grep", " /proc/sys ", "/proc/mounts"); !strings.Contains(out, " ro,") {
			t.Errorf("/proc/sys in /proc/mounts: %q, want a read-only mount (readonlyPaths)", out)
		}
	})
}

// runAsNonRoot with an image whose user is root (busybox names none) is
// refused before the runtime is asked, as verifyRunAsNonRoot does.
func TestRunAsNonRootRootImageOnRuntime(t *testing.T) {
	eachRuntime(t, func(t *testing.T, e *killEnv) {
		yes := true
		c := ctr("nonroot", "echo ready; sleep 600")
		c.Image = e.rt.BusyboxImage
		c.SecurityContext = &v1.SecurityContext{RunAsNonRoot: &yes}
		pod := killPod("nonroot", 1, c)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		sandboxID, err := e.m.CreateSandbox(ctx, pod, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.removeAll(t, pod.UID) })
		id, err := e.m.StartContainer(ctx, sandboxID, sandboxConfig(t, e.m, pod), pod, &pod.Spec.Containers[0], &kubecontainer.PodStatus{}, kuberuntime.PodIPs{})
		if err == nil || !strings.Contains(err.Error(), "image will run as root") {
			t.Fatalf("StartContainer: id %q, err %v; want the runAsNonRoot refusal", id, err)
		}
		if id != "" {
			t.Errorf("a container was created: %s", id)
		}
	})
}
