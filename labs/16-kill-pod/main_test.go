package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"kubelet-labs/internal/critest"
	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labpod/labpodtest"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestLab: what the README shows, on each runtime. Three containers that
// ignore SIGTERM, grace 3 s: KillPod takes about 3 s (not 9), one
// SyncResult per container plus one for the sandbox, all exit 137; the
// sandbox is NotReady (and on containerd its network namespace is gone);
// the garbage collector removes nothing while the pod object exists and
// everything once it is gone. No goroutine is left.
func TestLab(t *testing.T) {
	admin := testenv.AdminClient(t)
	for _, rc := range critest.Cases() {
		t.Run(rc.Name, func(t *testing.T) {
			o := options{labpodtest.Options(t, rc, "lab-node-16")}
			ignore := goleak.IgnoreCurrent()
			var out testenv.SyncBuffer
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			rep, err := run(ctx, o, labenv.NewPrinter(&out))
			t.Logf("lab output:\n%s", out.String())
			if err != nil {
				t.Fatal(err)
			}

			t.Logf("%s: KillPod of 3 containers ignoring SIGTERM, grace 3s: %s", rc.Name, rep.KillTook)
			// Each container ignores SIGTERM, so KillPod lasts at least the
			// grace period. That the three stops run side by side is seen in
			// the order of the output, not in a duration a loaded machine
			// stretches: all three StopContainer calls are made before the
			// first of them returns.
			if rep.KillTook < 2500*time.Millisecond {
				t.Errorf("KillPod took %s, less than the 3 s grace period the containers ignore SIGTERM for", rep.KillTook)
			}
			if err := stopsOverlap(out.String(), 3); err != nil {
				t.Error(err)
			}
			kills := map[string]bool{}
			sandboxes := 0
			for _, r := range rep.Results {
				if r.Error != nil {
					t.Errorf("%s %v failed: %s", r.Action, r.Target, r.Message)
				}
				switch r.Action {
				case kubecontainer.KillContainer:
					kills[r.Target.(string)] = true
				case kubecontainer.KillPodSandbox:
					sandboxes++
				}
			}
			if len(kills) != 3 || sandboxes != 1 {
				t.Errorf("SyncResults: kills of %v and %d for the sandbox, want one, two, three and 1", kills, sandboxes)
			}
			for _, name := range []string{"one", "two", "three"} {
				if code, ok := rep.ExitCodes[name]; !ok || code != 137 {
					t.Errorf("container %s: exit %d (seen %t), want 137", name, code, ok)
				}
			}
			if rep.SandboxAfter != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
				t.Errorf("sandbox %s after KillPod, want NOTREADY", rep.SandboxAfter)
			}
			if rc.Name != "fakecri" && (rep.NetnsBefore == "" || !rep.NetnsGoneAfter) {
				t.Errorf("network namespace %q: gone after KillPod %t, want a namespace that StopPodSandbox removed", rep.NetnsBefore, rep.NetnsGoneAfter)
			}
			if g := rep.GC; len(g.Containers) != 3 || len(g.Sandboxes) != 1 || len(g.LogDirs) != 1 {
				t.Errorf("GC of the deleted and terminated pod removed %+v, want 3 containers, 1 sandbox, 1 log folder", g)
			}
			if !rep.ObjectAtGC {
				t.Error("the pod object was gone before the GC ran: the lab must show the GC does not wait for it")
			}
			if rep.LeftAfterGC != 0 {
				t.Errorf("%d sandboxes and containers of kill-demo left in the runtime after the GC", rep.LeftAfterGC)
			}
			if !rep.Gone {
				t.Error("the lab did not send the final delete")
			}
			if !strings.Contains(out.String(), "timeout=3s (3s from metadata.deletionGracePeriodSeconds)") {
				t.Error("the output does not show the deletion's grace period in the stops")
			}
			if _, err := admin.CoreV1().Pods("default").Get(ctx, "kill-demo", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("pod kill-demo still exists after the lab: %v", err)
			}
			// the record make check LAB=16 reads (record.go)
			kind := "mock"
			if rc.Name != "fakecri" {
				kind = "containerd"
			}
			if path, err := state.Path("16-kill-pod", RecordFile(kind)); err != nil {
				t.Error(err)
			} else if b, err := os.ReadFile(path); err != nil || !strings.Contains(string(b), "gc removed 3 containers 1 sandboxes 1 logdirs, left 0, object there true") {
				t.Errorf("the lab's record %s: %q (%v), want a line %q", path, b, err, "gc removed 3 containers 1 sandboxes 1 logdirs, left 0, object there true")
			}
			labpodtest.NoLeaks(t, ignore)
		})
	}
}

// An interrupted run (here: a cancelled context right after the start)
// leaves neither the pod object nor anything in the runtime.
func TestLabInterrupted(t *testing.T) {
	admin := testenv.AdminClient(t)
	o := options{labpodtest.Mock(t, "lab-node-16")}
	ctx, cancel := context.WithCancel(context.Background())
	var out testenv.SyncBuffer
	done := make(chan error, 1)
	go func() { _, err := run(ctx, o, labenv.NewPrinter(&out)); done <- err }()
	testenv.PollTrue(t, "step 2, KillPod", time.Minute, func() bool { return strings.Contains(out.String(), "2. KillPod") })
	cancel()
	if err := <-done; err == nil {
		t.Fatalf("run succeeded despite the cancel:\n%s", out.String())
	}
	t.Logf("output:\n%s", out.String())
	if !strings.Contains(out.String(), "cleanup: ") {
		t.Error("the output does not show the cleanup")
	}
	if _, err := admin.CoreV1().Pods("default").Get(context.Background(), "kill-demo", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod kill-demo still exists after the interrupted run: %v", err)
	}
}

// Bad input fails in one clear line, before anything is created.
func TestLabBadInput(t *testing.T) {
	o := options{labpodtest.Mock(t, "lab-node-16")}
	for _, tc := range []struct {
		name string
		edit func(*options)
		want string
	}{
		{"bad node name", func(o *options) { o.NodeName = "../x" }, "is not a valid Node name"},
		{"unknown runtime", func(o *options) { o.Kind = "cri-o" }, `--runtime "cri-o": want one of containerd`},
		{"no containerd", func(o *options) {
			o.Kind, o.Endpoint = labruntime.Containerd, "unix://"+t.TempDir()+"/none.sock"
		}, "not reachable"},
		{"not a pod", func(o *options) {
			p := t.TempDir() + "/svc.yaml"
			_ = os.WriteFile(p, []byte("apiVersion: v1\nkind: Service\nmetadata: {name: x}\n"), 0o600)
			o.PodFile = p
		}, "not a Pod"},
	} {
		oo := o
		tc.edit(&oo)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := run(ctx, oo, labenv.NewPrinter(&testenv.SyncBuffer{}))
		cancel()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

// stopsOverlap checks that n StopContainer calls were made before the
// first "stopped after" line: the containers were stopped in parallel.
func stopsOverlap(output string, n int) error {
	calls := 0
	for _, line := range strings.Split(output, "\n") {
		switch {
		case strings.Contains(line, "CRI StopContainer kill-demo/"):
			calls++
		case strings.Contains(line, "stopped after"):
			if calls != n {
				return fmt.Errorf("a container's stop returned after %d of %d StopContainer calls: the stops ran one after another, not side by side", calls, n)
			}
			return nil
		}
	}
	return fmt.Errorf("no \"stopped after\" line after %d StopContainer calls", calls)
}

// TestStopsOverlapSeesSequentialStops: the check fails on stops made one
// after another, and passes the lab's parallel ones.
func TestStopsOverlapSeesSequentialStops(t *testing.T) {
	parallel := "CRI StopContainer kill-demo/one\nCRI StopContainer kill-demo/two\nkill-demo/one stopped after 3s\nkill-demo/two stopped after 3s\n"
	sequential := "CRI StopContainer kill-demo/one\nkill-demo/one stopped after 3s\nCRI StopContainer kill-demo/two\nkill-demo/two stopped after 3s\n"
	if err := stopsOverlap(parallel, 2); err != nil {
		t.Errorf("parallel stops: %v", err)
	}
	if err := stopsOverlap(sequential, 2); err == nil {
		t.Error("sequential stops passed the check")
	}
}
