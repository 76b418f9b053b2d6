package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mylib/fakecri"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func defaults(kubeconfig, nodeName string) options {
	return options{kubeconfig: kubeconfig, nodeName: nodeName, timeout: time.Minute,
		relist: time.Second, resync: time.Minute, backOff: 10 * time.Second, housekeeping: 2 * time.Second}
}

// startLab runs the lab in-process, with its own state folder.
func startLab(t *testing.T, nodeName string) *testenv.Lab[*lab] {
	t.Helper()
	cp := testenv.ControlPlane(t)
	t.Setenv(state.EnvVar, t.TempDir())
	o := defaults(cp.AdminKubeconfig(), nodeName)
	return testenv.StartLab(t, func(ctx context.Context, w io.Writer, ready func(*lab)) error {
		return run(ctx, o, labenv.NewPrinter(w), ready)
	})
}

func testPod(name, nodeName string, policy v1.RestartPolicy, grace int64, command string) *v1.Pod {
	f := false
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.PodSpec{
			NodeName: nodeName, RestartPolicy: policy, TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken: &f,
			Containers:                   []v1.Container{{Name: "main", Image: "busybox", Command: []string{"sh", "-c", command}}},
		},
	}
}

// mockPod is the pod's sandbox and containers in the mock runtime.
func mockPod(l *lab, name string) (sandbox *fakecri.SandboxInfo, containers []fakecri.ContainerInfo) {
	snap := l.mock.Runtime().Snapshot()
	for i, sb := range snap.Sandboxes {
		if sb.Name == name && sb.Namespace == "default" {
			sandbox = &snap.Sandboxes[i]
		}
	}
	if sandbox == nil {
		return nil, nil
	}
	for _, c := range snap.Containers {
		if c.SandboxID == sandbox.ID {
			containers = append(containers, c)
		}
	}
	return sandbox, containers
}

func runningIn(l *lab, name string) (string, bool) {
	sb, cs := mockPod(l, name)
	if sb == nil || sb.State != "SANDBOX_READY" || len(cs) != 1 || cs[0].State != "CONTAINER_RUNNING" {
		return "", false
	}
	return cs[0].ID, true
}

// TestPodLifecycles: what the README walks through. A pod applied is
// synced and runs in the mock; its container exiting (restartPolicy
// Never) drives it to terminating and terminated on its own; a graceful
// delete drives another with the delete's grace period, after which the
// lab deletes it for good. Nothing of the lab is left afterwards.
func TestPodLifecycles(t *testing.T) {
	ctx := context.Background()
	admin := testenv.AdminClient(t)
	testenv.WaitDefaultServiceAccount(t, admin)
	testenv.NoLeaks(t)
	const nodeName = "t10-workers"
	running := startLab(t, nodeName)
	l, out := running.L, running.Out
	t.Cleanup(func() {
		_ = admin.CoreV1().Nodes().Delete(ctx, nodeName, metav1.DeleteOptions{})
	})

	// 1. Applied → SyncPod(create) → a sandbox and a running container.
	once, err := admin.CoreV1().Pods("default").Create(ctx, testPod("t10-oneshot", nodeName, v1.RestartPolicyNever, 30, "while true; do sleep 1; done"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().Pods("default").Delete(ctx, "t10-oneshot", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	// An update right behind the create (the README's kubectl label): its
	// sync must wait for the PLEG to see what the first one made.
	patch := []byte(`{"metadata":{"labels":{"step":"2"}}}`)
	if _, err := admin.CoreV1().Pods("default").Patch(ctx, "t10-oneshot", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// SyncPod(create), or SyncPod(update) when the label came before the
	// worker started: the pending create is then replaced (coalesced).
	out.WaitLine(t, time.Minute, "default/t10-oneshot: the pod cache shows no sandbox and no container → create them")
	var id string
	testenv.PollTrue(t, "the pod's container running in the mock", time.Minute, func() (ok bool) { id, ok = runningIn(l, "t10-oneshot"); return ok })
	// The PLEG sees it and syncs the pod again; now the cache has it, so
	// nothing is created twice.
	out.WaitLine(t, time.Minute, "PLEG      ContainerStarted default/t10-oneshot")
	out.WaitLine(t, time.Minute, "default/t10-oneshot: sandbox ")
	testenv.PollTrue(t, "a sync after the label update", time.Minute, func() bool {
		o := out.String()
		i := strings.Index(o, "UPDATE    default/t10-oneshot")
		return i >= 0 && strings.Contains(o[i:], "default/t10-oneshot: sandbox ")
	})
	if strings.Count(out.String(), "RunPodSandbox") != 1 {
		t.Errorf("the sandbox was created more than once:\n%s", out)
	}

	// 2. The container exits (the README's curl) → terminal → terminating → terminated.
	cc := fakecri.NewControlClient(l.mock.ControlSocketPath())
	defer cc.Close()
	if err := cc.SetContainerExited(ctx, id, 1, "Error"); err != nil {
		t.Fatal(err)
	}
	out.WaitLine(t, time.Minute, "PLEG      ContainerDied default/t10-oneshot")
	out.WaitLine(t, time.Minute, "worker    transition default/t10-oneshot sync → terminating: SyncPod reported the pod terminal")
	out.WaitLine(t, time.Minute, "worker    transition default/t10-oneshot terminating → terminated")
	out.WaitLine(t, time.Minute, "worker    finished   default/t10-oneshot")
	if sb, _ := mockPod(l, "t10-oneshot"); sb != nil {
		t.Errorf("the terminated pod's sandbox is still in the mock: %+v", sb)
	}
	if !l.workers.ShouldPodBeFinished(once.UID) || l.workers.CouldHaveRunningContainers(once.UID) {
		t.Error("the workers do not see the pod finished")
	}
	// Not deleted by anyone: it stays in the apiserver (no status is posted).
	if p, err := admin.CoreV1().Pods("default").Get(ctx, "t10-oneshot", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("the terminal pod should stay, undeleted: %v %v", err, p.DeletionTimestamp)
	}

	// 3. A graceful delete (grace 3 s) of a pod whose container ignores
	// SIGTERM → SyncTerminatingPod with grace 3 → terminated → deleted.
	slow, err := admin.CoreV1().Pods("default").Create(ctx, testPod("t10-slowstop", nodeName, v1.RestartPolicyAlways, 30, "trap '' TERM; while true; do sleep 1; done"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().Pods("default").Delete(ctx, "t10-slowstop", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	testenv.PollTrue(t, "the slowstop container running", time.Minute, func() bool { _, ok := runningIn(l, "t10-slowstop"); return ok })
	three := int64(3)
	if err := admin.CoreV1().Pods("default").Delete(ctx, "t10-slowstop", metav1.DeleteOptions{GracePeriodSeconds: &three}); err != nil {
		t.Fatal(err)
	}
	out.WaitLine(t, time.Minute, "worker    transition default/t10-slowstop sync → terminating, grace 3s: deletionTimestamp set (graceful delete)")
	out.WaitLine(t, time.Minute, "syncer    SyncTerminatingPod default/t10-slowstop: stop 1 running container(s) with grace 3s")
	out.WaitLine(t, time.Minute, "worker    finished   default/t10-slowstop")
	testenv.PollTrue(t, "t10-slowstop gone from the apiserver", time.Minute, func() bool {
		_, err := admin.CoreV1().Pods("default").Get(ctx, "t10-slowstop", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	out.WaitLine(t, time.Minute, "apiserver default/t10-slowstop: terminated and deleted")
	testenv.PollTrue(t, "the slowstop worker removed", time.Minute, func() bool { _, ok := l.workers.State(slow.UID); return !ok })
	if sb, _ := mockPod(l, "t10-slowstop"); sb != nil {
		t.Errorf("the deleted pod's sandbox is still in the mock: %+v", sb)
	}

	// 4. Deleting the finished pod: nothing to stop, deleted at once.
	if err := admin.CoreV1().Pods("default").Delete(ctx, "t10-oneshot", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.PollTrue(t, "t10-oneshot gone from the apiserver", time.Minute, func() bool {
		_, err := admin.CoreV1().Pods("default").Get(ctx, "t10-oneshot", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	testenv.PollTrue(t, "every worker removed", time.Minute, func() bool { return len(l.workers.Snapshot()) == 0 })

	// 5. Stop: nothing of the lab stays behind.
	// (NoLeaks checks at the end of the test that no goroutine is left.)
	sock := l.mock.SocketPath()
	running.Stop()
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the mock's socket %s is left: %v", sock, err)
	}
}

// TestClearErrors: bad flags and no cluster give one line, not a hang.
func TestClearErrors(t *testing.T) {
	t.Setenv(state.EnvVar, t.TempDir())
	o := defaults(filepath.Join(t.TempDir(), "missing.kubeconfig"), "t10-bad")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx, o, labenv.NewPrinter(io.Discard), nil); err == nil || !strings.Contains(err.Error(), "missing.kubeconfig") {
		t.Errorf("missing kubeconfig: %v", err)
	}
	o.relist = 0
	if err := o.check(); err == nil || !strings.Contains(err.Error(), "--relist-period") {
		t.Errorf("relist 0: %v", err)
	}
	o = defaults("", "Bad_Name")
	if err := o.check(); err == nil || !strings.Contains(err.Error(), "--node-name") {
		t.Errorf("bad node name: %v", err)
	}
}
