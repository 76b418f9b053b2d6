package fakecri

import (
	"errors"
	"net/http"
	"os"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestSetContainerExited(t *testing.T) {
	r := newRuntime(t)
	sb := runPod(t, r, podConfig("p"))
	// Even a container that ignores SIGTERM "crashes" when told to.
	id := createStart(t, r, sb, ctrConfig("c", "sh", "-c", "trap '' TERM; sleep infinity"))
	if err := r.SetContainerExited(id[:10], 42, "OOMKilled"); err != nil {
		t.Fatal(err)
	}
	// It returns only once the exit is recorded: no polling needed.
	st := ctrStatus(t, r, id)
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 42 || st.Reason != "OOMKilled" || st.FinishedAt == 0 {
		t.Fatalf("status %s %d %q", st.State, st.ExitCode, st.Reason)
	}
	wantCode(t, r.SetContainerExited(id, 1, ""), codes.FailedPrecondition, id)
	created := create(t, r, sb, ctrConfig("created"))
	wantCode(t, r.SetContainerExited(created, 1, ""), codes.FailedPrecondition, created)

	id2 := createStart(t, r, sb, ctrConfig("d"))
	if err := r.SetContainerExited(id2, 0, ""); err != nil {
		t.Fatal(err)
	}
	if st := ctrStatus(t, r, id2); st.ExitCode != 0 || st.Reason != "Completed" {
		t.Fatalf("default reason: %d %q", st.ExitCode, st.Reason)
	}
}

func TestSetSandboxNotReady(t *testing.T) {
	r := newRuntime(t)
	sb := runPod(t, r, podConfig("p"))
	c := createStart(t, r, sb, ctrConfig("c"))
	ch, cancel := r.SubscribeEvents()
	defer cancel()
	for range 2 { // idempotent
		if err := r.SetSandboxNotReady(sb[:8]); err != nil {
			t.Fatal(err)
		}
	}
	if st := sbStatus(t, r, sb); st.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatalf("state %s", st.State)
	}
	// Its containers keep running: noticing is the kubelet's job.
	if st := ctrStatus(t, r, c); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("container %s", st.State)
	}
	if ev := next(t, ch); ev.ContainerId != sb || ev.ContainerEventType != runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT {
		t.Fatalf("event %s %s", ev.ContainerEventType, ev.ContainerId)
	}
	wantCode(t, r.SetSandboxNotReady("nope"), codes.NotFound, "nope")
}

func TestSignalContainer(t *testing.T) {
	r := newRuntime(t)
	sb := runPod(t, r, podConfig("p"))
	id := createStart(t, r, sb, ctrConfig("c", "sh", "-c", "trap 'exit 0' USR1; trap '' TERM; sleep infinity"))
	if err := r.SignalContainer(id, "TERM"); err != nil {
		t.Fatal(err)
	}
	if err := r.SignalContainer(id, "SIGUSR1"); err != nil {
		t.Fatal(err)
	}
	if st := waitExited(t, r, id); st.ExitCode != 0 {
		t.Fatalf("exit %d, want 0 from the USR1 handler", st.ExitCode)
	}
	wantCode(t, r.SignalContainer(id, "BOGUS"), codes.InvalidArgument, "BOGUS")
}

func TestRuntimeConditions(t *testing.T) {
	r := newRuntime(t)
	cond := func(typ string) *runtimeapi.RuntimeCondition {
		resp, err := r.Status(tctx(t), &runtimeapi.StatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range resp.Status.Conditions {
			if c.Type == typ {
				return c
			}
		}
		return nil
	}
	if !cond(runtimeapi.RuntimeReady).Status || !cond(runtimeapi.NetworkReady).Status {
		t.Fatal("runtime must start ready")
	}
	if err := r.SetRuntimeCondition(runtimeapi.NetworkReady, false, "NetworkPluginNotReady", "cni config uninitialized"); err != nil {
		t.Fatal(err)
	}
	if c := cond(runtimeapi.NetworkReady); c.Status || c.Reason != "NetworkPluginNotReady" {
		t.Fatalf("condition %v", c)
	}
	wantCode(t, r.SetRuntimeCondition("", true, "", ""), codes.InvalidArgument, "")
}

func TestControlAPIOverUnixSocket(t *testing.T) {
	dir := shortTempDir(t)
	srv, err := Start(dir + "/cri.sock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	if srv.ControlSocketPath() != dir+"/cri-control.sock" {
		t.Fatalf("control socket %q", srv.ControlSocketPath())
	}
	fi, err := os.Stat(srv.ControlSocketPath())
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("control socket mode %v %v, want 0600", fi.Mode(), err)
	}
	r := srv.Runtime()
	sb := runPod(t, r, podConfig("p"))
	id := createStart(t, r, sb, ctrConfig("c"))

	cc := NewControlClient(srv.ControlSocketPath())
	defer cc.Close()
	c := tctx(t)
	snap, err := cc.State(c)
	if err != nil || len(snap.Sandboxes) != 1 || len(snap.Containers) != 1 || snap.Containers[0].State != "CONTAINER_RUNNING" {
		t.Fatalf("state %+v %v", snap, err)
	}
	if err := cc.SetContainerExited(c, id[:12], 3, "Crashed"); err != nil {
		t.Fatal(err)
	}
	if st := ctrStatus(t, r, id); st.ExitCode != 3 || st.Reason != "Crashed" {
		t.Fatalf("status %d %q", st.ExitCode, st.Reason)
	}
	if err := cc.SetSandboxNotReady(c, sb); err != nil {
		t.Fatal(err)
	}
	if err := cc.SetRuntimeCondition(c, "NetworkReady", false, "NoCNI", ""); err != nil {
		t.Fatal(err)
	}
	snap, _ = cc.State(c)
	if snap.Sandboxes[0].State != "SANDBOX_NOTREADY" || snap.Containers[0].ExitCode != 3 {
		t.Fatalf("state after control: %+v", snap)
	}
	var ce *ControlError
	for _, tc := range []struct {
		err  error
		code int
	}{
		{cc.SetContainerExited(c, id, 1, ""), http.StatusConflict},     // not running any more
		{cc.SetContainerExited(c, "ffff", 1, ""), http.StatusNotFound}, // unknown
		{cc.SignalContainer(c, id, "NOPE"), http.StatusBadRequest},
	} {
		if !errors.As(tc.err, &ce) || ce.StatusCode != tc.code {
			t.Fatalf("got %v, want HTTP %d", tc.err, tc.code)
		}
	}
}
