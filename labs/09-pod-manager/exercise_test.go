package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/internal/testenv"
)

// TestExercise (README, section Exercise): the running lab does what a
// kubelet's housekeeping does with a mirror pod that has no static pod —
// it deletes it, as a node may and as the kubelet does — and leaves every
// other pod alone.
func TestExercise(t *testing.T) {
	testenv.Exercise(t)
	const nodeName = "t09-exercise"
	const patience = 12 * time.Second // six housekeeping periods of 2 s
	admin := testenv.AdminClient(t)
	pods := admin.CoreV1().Pods("default")
	events, _ := startLab(t, nodeName) // on failure, StartLab shows what the lab printed
	expectOp(t, events, "ADD")

	// kubectl run mirrored … (README, section Exercise), and a plain pod.
	mirror := boundPod("t09-ex-mirrored", nodeName)
	mirror.Annotations = map[string]string{kubetypes.ConfigMirrorAnnotationKey: "made-by-hand"}
	plain := boundPod("t09-ex-plain", nodeName)
	zero := int64(0)
	for _, p := range []string{mirror.Name, plain.Name} {
		t.Cleanup(func() { _ = pods.Delete(context.Background(), p, metav1.DeleteOptions{GracePeriodSeconds: &zero}) })
	}
	ctx := context.Background()
	for _, p := range []string{plain.Name, mirror.Name} {
		pod := plain
		if p == mirror.Name {
			pod = mirror
		}
		if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// The ops the lab's source sends until the mirror pod is gone.
	var ops []string
	deadline := time.After(patience)
wait:
	for {
		select {
		case s := <-events:
			ops = append(ops, s.op+grace(s))
			if s.op == "REMOVE "+mirror.Name {
				break wait
			}
		case <-deadline:
			break wait
		}
	}
	seen := "the lab's source sent: " + strings.Join(ops, ", ")

	got, err := pods.Get(ctx, mirror.Name, metav1.GetOptions{})
	switch {
	case err == nil && got.DeletionTimestamp != nil:
		t.Errorf("the orphaned mirror pod %s was deleted with grace %ds: it stays Terminating, as no one stops its containers — "+
			"a node deletes a mirror pod with grace 0 (the kubelet's mirror client, DeleteMirrorPod, pkg/kubelet/pod/mirror_client.go:116-140). %s",
			mirror.Name, deref(got.DeletionGracePeriodSeconds), seen)
	case err == nil:
		t.Errorf("the orphaned mirror pod %s is still there after %s: the lab's pod manager lists it among the orphans "+
			"(GetPodsAndMirrorPods), and nothing deletes it. A kubelet does, at every housekeeping (2 s): HandlePodCleanups, "+
			"pkg/kubelet/kubelet_pods.go:1317-1329. %s", mirror.Name, patience, seen)
	case !apierrors.IsNotFound(err):
		t.Fatal(err)
	}
	if p, err := pods.Get(ctx, plain.Name, metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("the pod %s (not a mirror pod) was deleted too: housekeeping deletes only orphaned mirror pods, a pod from the apiserver is the kubelet's to run. %s", plain.Name, seen)
	}
}

// grace shows a DELETE's grace period.
func grace(s seen) string {
	if strings.HasPrefix(s.op, "DELETE ") && s.grace != nil {
		return fmt.Sprintf(" (grace %ds)", *s.grace)
	}
	return ""
}

func deref(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}
