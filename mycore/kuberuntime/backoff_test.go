package kuberuntime

import (
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/flowcontrol"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubekr "k8s.io/kubernetes/pkg/kubelet/kuberuntime"
	testingclock "k8s.io/utils/clock/testing"
)

// The backoff-key stage's grader. Upstream (v1.36.3): GetBackoffKey is
// pkg/kubelet/kuberuntime/helpers.go:190-207, doBackOff is
// kuberuntime_manager.go:1908-1940. The back-off runs on a fake clock.

func backoffPod() (*v1.Pod, *v1.Container) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "crashloop", Namespace: "default", UID: "uid-1", Labels: map[string]string{"app": "x"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "app", Image: "busybox:1.36", Command: []string{"sh", "-c", "exit 1"},
			Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}},
		}}},
	}
	return pod, &pod.Spec.Containers[0]
}

// TestBackoffKey: which changes start the back-off over (a new key) and
// which do not, and the key is the very string upstream makes.
func TestBackoffKey(t *testing.T) {
	pod, c := backoffPod()
	base := backoffKey(pod, c)
	if base == "" {
		t.Fatalf("backoffKey = \"\": want the FNV-64a hash, in hex, of pod name/namespace/UID, container name, image, resources joined with \"/\" (helpers.go:193-207)")
	}
	if up := kubekr.GetBackoffKey(pod, c); base != up {
		t.Errorf("backoffKey = %q, upstream's GetBackoffKey = %q: hash (fnv.New64a) strings.Join([name, namespace, uid, container name, image, resources.String()], \"/\") and format it with strconv.FormatUint(sum, 16) (helpers.go:196-206)", base, up)
	}
	for _, tc := range []struct {
		name   string
		change func(p *v1.Pod, c *v1.Container)
		newKey bool
	}{
		{"another pod name", func(p *v1.Pod, _ *v1.Container) { p.Name = "other" }, true},
		{"another namespace", func(p *v1.Pod, _ *v1.Container) { p.Namespace = "other" }, true},
		{"another pod UID (the pod was deleted and made again)", func(p *v1.Pod, _ *v1.Container) { p.UID = "uid-2" }, true},
		{"another container name", func(_ *v1.Pod, c *v1.Container) { c.Name = "other" }, true},
		{"a new image", func(_ *v1.Pod, c *v1.Container) { c.Image = "busybox:1.37" }, true},
		{"new resources (an in-place resize)", func(_ *v1.Pod, c *v1.Container) {
			c.Resources.Limits[v1.ResourceMemory] = resource.MustParse("128Mi")
		}, true},
		{"a new request", func(_ *v1.Pod, c *v1.Container) {
			c.Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m")}
		}, true},
		{"another command (not in the key)", func(_ *v1.Pod, c *v1.Container) { c.Command = []string{"true"} }, false},
		{"another env (not in the key)", func(_ *v1.Pod, c *v1.Container) { c.Env = []v1.EnvVar{{Name: "A", Value: "1"}} }, false},
		{"other pod labels (not in the key)", func(p *v1.Pod, _ *v1.Container) { p.Labels = nil }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, c := backoffPod()
			tc.change(p, c)
			got := backoffKey(p, c)
			switch {
			case tc.newKey && got == base:
				t.Errorf("%s: backoffKey unchanged (%q): upstream's key holds pod name, namespace, UID, container name, image and resources, so this change starts the back-off over (helpers.go:196-203)", tc.name, got)
			case !tc.newKey && got != base:
				t.Errorf("%s: backoffKey changed (%q → %q): only pod name, namespace, UID, container name, image and resources are in upstream's key (helpers.go:196-203); a crash loop must not escape its back-off by this", tc.name, base, got)
			}
		})
	}
}

// exitedAt is the pod cache with one exited instance of c.
func exitedAt(c *v1.Container, finished time.Time) *kubecontainer.PodStatus {
	return &kubecontainer.PodStatus{ContainerStatuses: []*kubecontainer.Status{{
		ID: kubecontainer.ContainerID{Type: "containerd", ID: "c1"}, Name: c.Name,
		State: kubecontainer.ContainerStateExited, ExitCode: 1, FinishedAt: finished,
	}}}
}

// TestDoBackOff: a crash loop, exit by exit, on a fake clock with the
// kubelet's 10 s initial back-off.
func TestDoBackOff(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 4, 26, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0)
	backOff := flowcontrol.NewFakeBackOff(10*time.Second, 300*time.Second, clk)
	pod, c := backoffPod()

	if err, msg := doBackOff(pod, c, exitedAt(c, t0), nil); err != nil || msg != "" {
		t.Errorf("doBackOff with no back-off = %v, %q; want nil: no crashLoopBackOff, no wait", err, msg)
	}
	running := &kubecontainer.PodStatus{ContainerStatuses: []*kubecontainer.Status{{Name: c.Name, State: kubecontainer.ContainerStateRunning}}}
	if err, _ := doBackOff(pod, c, running, backOff); err != nil || backOff.Get(kubekr.GetBackoffKey(pod, c)) != 0 {
		t.Errorf("doBackOff with no exited instance = %v (back-off now %s); want nil and nothing recorded: only an exited container is backed off (kuberuntime_manager.go:1910-1920)", err, backOff.Get(kubekr.GetBackoffKey(pod, c)))
	}

	// First exit: the first restart is free, and arms 10 s.
	exit1 := t0.Add(-time.Second)
	if err, msg := doBackOff(pod, c, exitedAt(c, exit1), backOff); err != nil {
		t.Fatalf("first exit: doBackOff = %v %q; want nil: the first restart is free, IsInBackOffSince has no entry yet (kuberuntime_manager.go:1927, 1938)", err, msg)
	}
	if got := backOff.Get(kubekr.GetBackoffKey(pod, c)); got != 10*time.Second {
		t.Fatalf("after the first restart the back-off under upstream's key is %s, want 10s: doBackOff calls backOff.Next(key, FinishedAt) when it lets a container start (kuberuntime_manager.go:1938), with key = GetBackoffKey (helpers.go:193)", got)
	}

	// Second exit 2 s later, seen at once: wait until exit + 10 s.
	exit2 := t0.Add(2 * time.Second)
	clk.SetTime(exit2)
	err, msg := doBackOff(pod, c, exitedAt(c, exit2), backOff)
	var be *kubecontainer.BackoffError
	if !errors.As(err, &be) || err.Error() != kubecontainer.ErrCrashLoopBackOff.Error() {
		t.Fatalf("second exit within 10s: doBackOff = %v; want kubecontainer.NewBackoffError(ErrCrashLoopBackOff, …) (kuberuntime_manager.go:1927-1935)", err)
	}
	if want := exit2.Add(10 * time.Second); !be.BackoffTime().Equal(want) {
		t.Errorf("BackoffError ends at %s, want FinishedAt + back-off = %s: the pod worker retries exactly then (kuberuntime_manager.go:1935)", be.BackoffTime().Format(time.TimeOnly), want.Format(time.TimeOnly))
	}
	if want := "back-off 10s restarting failed container=app pod=crashloop_default(uid-1)"; msg != want {
		t.Errorf("message %q, want %q (kuberuntime_manager.go:1933, format.Pod)", msg, want)
	}

	// The same exit, after the 10 s: start, and the next wait doubles.
	clk.SetTime(exit2.Add(11 * time.Second))
	if err, _ := doBackOff(pod, c, exitedAt(c, exit2), backOff); err != nil {
		t.Errorf("11s after the exit with a 10s back-off: doBackOff = %v; want nil: IsInBackOffSince is false once the wait since FinishedAt has passed (kuberuntime_manager.go:1927)", err)
	}
	if got := backOff.Get(kubekr.GetBackoffKey(pod, c)); got != 20*time.Second {
		t.Errorf("after the second restart the back-off is %s, want 20s: backOff.Next doubles it (kuberuntime_manager.go:1938)", got)
	}

	// In back-off again; a new image or new resources is a new key: free.
	exit3 := exit2.Add(12 * time.Second)
	clk.SetTime(exit3)
	if err, _ := doBackOff(pod, c, exitedAt(c, exit3), backOff); err == nil {
		t.Fatalf("third exit within 20s: doBackOff = nil, want a BackoffError (kuberuntime_manager.go:1927)")
	}
	for what, change := range map[string]func(*v1.Container){
		"a new image":   func(c *v1.Container) { c.Image = "busybox:1.37" },
		"new resources": func(c *v1.Container) { c.Resources.Limits[v1.ResourceMemory] = resource.MustParse("128Mi") },
	} {
		p, nc := backoffPod()
		change(nc)
		if err, _ := doBackOff(p, nc, exitedAt(nc, exit3), backOff); err != nil {
			t.Errorf("in back-off, then %s: doBackOff = %v; want nil: the image and the resources are in the key (helpers.go:201-202), so the change starts the back-off over", what, err)
		}
	}
	if !strings.Contains(msg, "container=app") {
		t.Errorf("message %q does not name the container", msg)
	}
}
