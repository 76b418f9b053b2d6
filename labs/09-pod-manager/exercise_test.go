package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubepod "k8s.io/kubernetes/pkg/kubelet/pod"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/podconfig"
)

// TestExercise (README, section Exercise): the running lab does what a
// kubelet's housekeeping does with a mirror pod that has no static pod —
// it deletes it, as a node may and as the kubelet does — and leaves every
// other pod alone: a plain pod, and a mirror pod paired with its static
// pod, which is the static pod's face in the API.
func TestExercise(t *testing.T) {
	testenv.Exercise(t)
	const nodeName = "t09-exercise"
	const patience = 12 * time.Second // six housekeeping periods of 2 s
	admin := testenv.AdminClient(t)
	pods := admin.CoreV1().Pods("default")
	static := staticPod("t09-ex-static", nodeName)
	events := startLabWithStaticPod(t, nodeName, static)
	expectOp(t, events, "ADD")
	zero := int64(0)
	ctx := context.Background()
	createPod := func(p *v1.Pod) {
		t.Helper()
		t.Cleanup(func() { _ = pods.Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}) })
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// The static pod's mirror, as the kubelet's mirror client makes it
	// (CreateMirrorPod, pkg/kubelet/pod/mirror_client.go:69-107): same
	// name, the static pod's hash as its mirror annotation. Once the
	// source has handed it to the pod manager, the two are paired.
	paired := boundPod(static.Name, nodeName)
	paired.Annotations = map[string]string{
		kubetypes.ConfigMirrorAnnotationKey: static.Annotations[kubetypes.ConfigHashAnnotationKey],
		kubetypes.ConfigHashAnnotationKey:   static.Annotations[kubetypes.ConfigHashAnnotationKey],
		kubetypes.ConfigSourceAnnotationKey: kubetypes.FileSource,
	}
	createPod(paired)
	var ops []string
	if s := waitOp(t, events, "ADD "+paired.Name, &ops); slices.Contains(s.orphans, paired.Name+"_default") {
		t.Fatalf("the test's mirror pod %s is an orphan: its static pod is not in the pod manager (%v)", paired.Name, s.pods)
	}

	// kubectl run mirrored … (README, section Exercise), and a plain pod,
	// after the paired mirror: the housekeeping that deletes the orphan
	// has seen the paired one too.
	mirror := boundPod("t09-ex-mirrored", nodeName)
	mirror.Annotations = map[string]string{kubetypes.ConfigMirrorAnnotationKey: "made-by-hand"}
	plain := boundPod("t09-ex-plain", nodeName)
	createPod(plain)
	createPod(mirror)

	// The ops the lab's source sends until the mirror pod is gone.
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
	if p, err := pods.Get(ctx, paired.Name, metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("the mirror pod %s was deleted although its static pod runs on the node: housekeeping deletes only the orphans, "+
			"the mirror pods no static pod of the same full name (name_namespace) pairs with — GetPodsAndMirrorPods' third result, "+
			"pkg/kubelet/pod/pod_manager.go:221-232. %s", paired.Name, seen)
	}
}

// staticPod is a static pod of the node as the kubelet's file source
// hands it over (pkg/kubelet/config/common.go:55-105): its name ends with
// the node's, its source is "file", its hash is its UID.
func staticPod(name, nodeName string) *v1.Pod {
	p := boundPod(name+"-"+nodeName, nodeName)
	p.UID = types.UID("t09-exercise-static-uid")
	p.Annotations = map[string]string{
		kubetypes.ConfigSourceAnnotationKey: kubetypes.FileSource,
		kubetypes.ConfigHashAnnotationKey:   string(p.UID),
	}
	return p
}

// startLabWithStaticPod is startLab, with static handed to the lab's pod
// manager as the file source would, before anything else: lab 09 watches
// only the apiserver, and the exercise needs a static pod to pair a
// mirror pod with. It goes through the lab's own handler (an ADD from
// the file source, HandlePodAdditions) at the first update, in the lab's
// loop, so nothing races it.
func startLabWithStaticPod(t *testing.T, nodeName string, static *v1.Pod) <-chan seen {
	t.Helper()
	testenv.NoLeaks(t)
	cp := testenv.ControlPlane(t)
	t.Setenv(state.EnvVar, t.TempDir())
	events := make(chan seen, 100)
	o := options{kubeconfig: cp.AdminKubeconfig(), nodeName: nodeName, timeout: time.Minute}
	lab := testenv.StartLab(t, func(ctx context.Context, out io.Writer, ready func(<-chan seen)) error {
		first := true
		return run(ctx, o, labenv.NewPrinter(out), func(u kubetypes.PodUpdate, pm kubepod.Manager) {
			if first {
				add := kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.FileSource, Pods: []*v1.Pod{static}}
				if err := podconfig.Dispatch(ctx, add, podconfig.ManagerHandler{Pods: pm}); err != nil {
					t.Errorf("handing the static pod to the pod manager: %v", err)
				}
			}
			s := seen{op: podconfig.OpName(u.Op), pods: map[string]*v1.Pod{}}
			for _, p := range u.Pods {
				s.op += " " + p.Name
			}
			if len(u.Pods) > 0 {
				s.grace = u.Pods[0].DeletionGracePeriodSeconds
			}
			all, _, orphans := pm.GetPodsAndMirrorPods()
			for _, p := range all {
				s.pods[p.Name] = p
			}
			s.orphans = orphans
			events <- s
			if first {
				first = false
				ready(events)
			}
		})
	})
	return lab.L
}

// waitOp waits (90 s at most) for the op want, appending every op seen to
// ops, and returns its view of the manager.
func waitOp(t *testing.T, events <-chan seen, want string, ops *[]string) seen {
	t.Helper()
	timeout := time.After(90 * time.Second)
	for {
		select {
		case s := <-events:
			*ops = append(*ops, s.op+grace(s))
			if s.op == want {
				return s
			}
		case <-timeout:
			t.Fatalf("no op %q within 90s; the lab's source sent: %s", want, strings.Join(*ops, ", "))
		}
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
