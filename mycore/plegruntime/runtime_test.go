package plegruntime_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"kubelet-labs/internal/critest"
	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/plegruntime"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestPodsAndStatus runs against both runtimes: the grouping by label, the
// states the PLEG diffs, and the status the pod workers read.
func TestPodsAndStatus(t *testing.T) {
	for _, rc := range critest.Cases() {
		t.Run(rc.Name, func(t *testing.T) {
			rt := rc.Setup(t)
			c := critest.Dial(t, rt)
			testPodsAndStatus(t, rt, c)
		})
	}
}

func testPodsAndStatus(t *testing.T, rt critest.Runtime, c *cri.Client) {
	ctx := ctxT(t)
	r := plegruntime.New(c)
	p := critest.Pod(t, "rt")
	sb, sbCfg := critest.RunPod(t, c, p)
	sleeper, err := c.StartContainer(ctx, sb, sbCfg, p.ContainerConfig(cri.Container{Name: "sleeper", Image: rt.BusyboxImage, Command: []string{"sh", "-c", "sleep 600"}}))
	if err != nil {
		t.Fatal(err)
	}
	quitter, err := c.StartContainer(ctx, sb, sbCfg, p.ContainerConfig(cri.Container{Name: "quitter", Image: rt.BusyboxImage, Command: []string{"sh", "-c", "exit 3"}}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitContainerState(ctx, quitter, runtimeapi.ContainerState_CONTAINER_EXITED, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}

	// GetPods(all=true): our pod, with its sandbox and both containers.
	pods, err := r.GetPods(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	pod := kubecontainer.Pods(pods).FindPodByID(types.UID(p.UID))
	if pod.ID == "" {
		t.Fatalf("pod %s not in GetPods(all): %v", p.UID, pods)
	}
	if pod.Name != p.Name || pod.Namespace != p.Namespace || len(pod.Sandboxes) != 1 || len(pod.Containers) != 2 {
		t.Fatalf("pod %s/%s with %d sandboxes and %d containers: want %s/%s, 1 and 2", pod.Namespace, pod.Name, len(pod.Sandboxes), len(pod.Containers), p.Namespace, p.Name)
	}
	if pod.Sandboxes[0].ID.ID != sb || pod.Sandboxes[0].State != kubecontainer.ContainerStateRunning {
		t.Errorf("sandbox %+v, want %s running", pod.Sandboxes[0], sb)
	}
	states := map[string]kubecontainer.State{}
	for _, ctr := range pod.Containers {
		states[ctr.ID.ID] = ctr.State
		if ctr.ID.Type != r.Type() || ctr.ID.Type == "cri" || ctr.PodSandboxID != sb || ctr.Image == "" {
			t.Errorf("container %+v: want type %s, sandbox %s, an image", ctr, r.Type(), sb)
		}
	}
	if states[sleeper] != kubecontainer.ContainerStateRunning || states[quitter] != kubecontainer.ContainerStateExited {
		t.Errorf("states %v: want sleeper running, quitter exited", states)
	}

	// GetPods(all=false) drops the exited container, as the kubelet's
	// "running pods" view does.
	running, err := r.GetPods(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if rp := kubecontainer.Pods(running).FindPodByID(types.UID(p.UID)); len(rp.Containers) != 1 || rp.Containers[0].ID.ID != sleeper {
		t.Errorf("GetPods(false) containers %v, want only %s", rp.Containers, sleeper)
	}

	// GetPod finds the same pod by UID.
	one, err := r.GetPod(ctx, types.UID(p.UID))
	if err != nil || len(one.Containers) != 2 {
		t.Fatalf("GetPod: %v, %v", one, err)
	}

	// GetPodStatus: what the PLEG puts into the cache.
	st, err := r.GetPodStatus(ctx, &pod)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.SandboxStatuses) != 1 || st.SandboxStatuses[0].State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Errorf("sandbox statuses %v", st.SandboxStatuses)
	}
	if !st.TimeStamp.Equal(pod.Timestamp) || st.TimeStamp.IsZero() {
		t.Errorf("status time %s, want the list's %s", st.TimeStamp, pod.Timestamp)
	}
	// (No FinishedAt >= StartedAt check: containerd stamped a process that
	// exits at once 0.6 ms before its start, as it records both from
	// different events.)
	q := st.FindContainerStatusByName("quitter")
	if q == nil || q.State != kubecontainer.ContainerStateExited || q.ExitCode != 3 || q.FinishedAt.IsZero() {
		t.Errorf("quitter status %+v, want exited with 3", q)
	}
	if s := st.FindContainerStatusByName("sleeper"); s == nil || s.State != kubecontainer.ContainerStateRunning || s.StartedAt.IsZero() {
		t.Errorf("sleeper status %+v", s)
	}
	if len(st.ActiveContainerStatuses) != 2 {
		t.Errorf("%d active container statuses, want 2", len(st.ActiveContainerStatuses))
	}
	if rt.Name == "fakecri" && len(st.IPs) != 1 {
		t.Errorf("pod IPs %v, want the sandbox's one IP", st.IPs)
	}
}

// TestPodNotFound: an unknown UID is kubecontainer.ErrPodNotFound, which
// the PLEG and the kubelet test with errors.Is-style equality.
func TestPodNotFound(t *testing.T) {
	c := critest.Dial(t, critest.FakeCRI(t))
	_, err := plegruntime.New(c).GetPod(ctxT(t), "no-such-uid")
	if !errors.Is(err, kubecontainer.ErrPodNotFound) {
		t.Fatalf("GetPod(unknown) = %v, want ErrPodNotFound", err)
	}
}

// TestNoMethodPanics calls every method of kubecontainer.Runtime with zero
// arguments: each returns (an error wrapping ErrNotImplemented, a CRI error
// or a harmless value), none panics.
func TestNoMethodPanics(t *testing.T) {
	c := critest.Dial(t, critest.FakeCRI(t))
	var r kubecontainer.Runtime = plegruntime.New(c)
	v := reflect.ValueOf(r)
	iface := reflect.TypeOf((*kubecontainer.Runtime)(nil)).Elem()
	unimplemented := 0
	for i := 0; i < iface.NumMethod(); i++ {
		m := iface.Method(i)
		t.Run(m.Name, func(t *testing.T) {
			fn := v.MethodByName(m.Name)
			args := make([]reflect.Value, fn.Type().NumIn())
			for j := range args {
				at := fn.Type().In(j)
				if at == reflect.TypeOf((*context.Context)(nil)).Elem() {
					args[j] = reflect.ValueOf(ctxT(t))
				} else {
					args[j] = reflect.Zero(at)
				}
			}
			out := fn.Call(args) // a panic fails the test
			for _, o := range out {
				if err, ok := o.Interface().(error); ok && errors.Is(err, plegruntime.ErrNotImplemented) {
					unimplemented++
				}
				if res, ok := o.Interface().(kubecontainer.PodSyncResult); ok && errors.Is(res.SyncError, plegruntime.ErrNotImplemented) {
					unimplemented++
				}
			}
		})
	}
	// 17 of the interface's methods are what kuberuntime does to the node.
	if unimplemented != 17 {
		t.Errorf("%d methods say ErrNotImplemented, want 17", unimplemented)
	}
}

// TestVersion: the runtime's name becomes the container ID scheme and the
// version compares semantically.
func TestVersion(t *testing.T) {
	c := critest.Dial(t, critest.FakeCRI(t))
	r := plegruntime.New(c)
	if _, err := r.APIVersion(); err == nil {
		t.Error("APIVersion before Version: want an error")
	}
	v, err := r.Version(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if r.Type() != "fakecri" {
		t.Errorf("Type %q, want fakecri", r.Type())
	}
	if cmp, err := v.Compare("0.0.1"); err != nil || cmp != 1 {
		t.Errorf("%s compared with 0.0.1 = %d, %v", v, cmp, err)
	}
	api, err := r.APIVersion()
	if err != nil || api.String() == "" {
		t.Errorf("APIVersion %v, %v", api, err)
	}
}
