package main

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelet-labs/internal/testenv"
	"kubelet-labs/labs/13-virtual-pod/virtualnode"
	"kubelet-labs/mycore/status"
)

// TestExercise applies forbidden.yaml and readyz.yaml with restartPolicy
// OnFailure to the lab's node (README, Exercise): the 403 must be run
// again and again — RESTARTS climbing, lastState the previous run's exit
// 22, the pod never Failed — and the 200 once, Succeeded with RESTARTS 0.
func TestExercise(t *testing.T) {
	testenv.Exercise(t)
	ctx := context.Background()
	admin := testenv.AdminClient(t)
	testenv.PollTrue(t, "service account default/default", time.Minute, func() bool {
		_, err := admin.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
	apiserver := strings.TrimSuffix(testenv.AdminConfig(t).Host, "/")
	const nodeName = "t13-exercise"
	startLab(t, nodeName)
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(ctx, nodeName, metav1.DeleteOptions{}) })

	failing := examplePod(t, "forbidden.yaml", nodeName, apiserver)
	failing.Name, failing.Spec.RestartPolicy = "forbidden-onfailure", v1.RestartPolicyOnFailure
	succeeding := examplePod(t, "readyz.yaml", nodeName, apiserver)
	succeeding.Name, succeeding.Spec.RestartPolicy = "readyz-onfailure", v1.RestartPolicyOnFailure
	create(t, admin, failing)
	create(t, admin, succeeding)

	// The failing one: restarted at least 3 times, or the reason it is not.
	var last *v1.Pod
	deadline := time.Now().Add(30 * time.Second)
	for ; time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, failing.Name, metav1.GetOptions{})
		if err != nil {
			continue
		}
		last = p
		if p.Status.Reason == "UnsupportedRestartPolicy" {
			t.Fatalf("the node rejected the OnFailure pod at admission: %s — admit OnFailure pods (admit in virtualnode/loop.go)", p.Status.Message)
		}
		if len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 3 {
			break
		}
	}
	if last == nil || len(last.Status.ContainerStatuses) != 1 {
		t.Fatalf("pod %s has no container status after 30s: is it admitted and run? (%v)", failing.Name, last)
	}
	cs := last.Status.ContainerStatuses[0]
	t.Logf("%s: phase %s, RESTARTS %d, %s", failing.Name, last.Status.Phase, cs.RestartCount, status.Describe(last.Status))
	switch {
	case cs.RestartCount < 3:
		t.Errorf("%s: RESTARTS %d after 30s (%s): a container whose last run failed must start again under OnFailure — ask kubecontainer.ShouldContainerBeRestarted in SyncPod (virtualnode/syncer.go), and give the new run restartCount+1",
			failing.Name, cs.RestartCount, status.Describe(last.Status))
	case last.Status.Phase == v1.PodFailed || last.Status.Phase == v1.PodSucceeded:
		t.Errorf("%s: phase %s while it restarts: a pod whose container will run again is not over", failing.Name, last.Status.Phase)
	}
	if lt := cs.LastTerminationState.Terminated; lt == nil || lt.ExitCode != virtualnode.ExitHTTPError {
		t.Errorf("%s: lastState %+v, want the previous run, terminated with exit %d: make the runtime's Status list the previous run too (the second-newest container of a name is lastState)",
			failing.Name, cs.LastTerminationState, virtualnode.ExitHTTPError)
	}
	if err := admin.CoreV1().Pods("default").Delete(ctx, failing.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// The succeeding one: ran once, and is over.
	ok := waitPhase(t, admin, succeeding.Name, v1.PodSucceeded)
	if n := ok.Status.ContainerStatuses[0].RestartCount; n != 0 {
		t.Errorf("%s: RESTARTS %d, want 0: OnFailure does not restart a container that exited 0", succeeding.Name, n)
	}
}
