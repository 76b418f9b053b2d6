package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubepod "k8s.io/kubernetes/pkg/kubelet/pod"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/podconfig"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// seen is one dispatched update and the manager's view right after it.
type seen struct {
	op      string // "ADD web", "REMOVE web", ...
	grace   *int64 // of the first pod, for DELETE
	pods    map[string]*v1.Pod
	mirrors []string
	orphans []string
}

// startLab runs the lab in-process as node nodeName and returns once the
// apiserver source has sent its first update (the first op on the channel).
// When the test ends the lab is stopped, and no goroutine of it may be left.
func startLab(t *testing.T, nodeName string) (<-chan seen, *testenv.Lines) {
	t.Helper()
	testenv.NoLeaks(t)
	cp := testenv.ControlPlane(t)
	t.Setenv(state.EnvVar, t.TempDir())
	events := make(chan seen, 100)
	observe := func(u kubetypes.PodUpdate, pm kubepod.Manager) {
		s := seen{op: podconfig.OpName(u.Op), pods: map[string]*v1.Pod{}}
		for _, p := range u.Pods {
			s.op += " " + p.Name
		}
		if len(u.Pods) > 0 {
			s.grace = u.Pods[0].DeletionGracePeriodSeconds
		}
		all, mirrors, orphans := pm.GetPodsAndMirrorPods()
		for _, p := range all {
			s.pods[p.Name] = p
		}
		for _, p := range mirrors {
			s.mirrors = append(s.mirrors, p.Name)
		}
		s.orphans = orphans
		events <- s
	}
	o := options{kubeconfig: cp.AdminKubeconfig(), nodeName: nodeName, timeout: time.Minute}
	lab := testenv.StartLab(t, func(ctx context.Context, out io.Writer, ready func(<-chan seen)) error {
		first := true
		return run(ctx, o, labenv.NewPrinter(out), func(u kubetypes.PodUpdate, pm kubepod.Manager) {
			observe(u, pm)
			if first {
				first = false
				ready(events)
			}
		})
	})
	return lab.L, lab.Out
}

func expectOp(t *testing.T, events <-chan seen, want string) seen {
	t.Helper()
	select {
	case s := <-events:
		if s.op != want {
			t.Fatalf("op %q, want %q", s.op, want)
		}
		return s
	case <-time.After(90 * time.Second):
		t.Fatalf("no op within 90s, want %q", want)
	}
	return seen{}
}

func expectNothing(t *testing.T, events <-chan seen, d time.Duration) {
	t.Helper()
	select {
	case s := <-events:
		t.Fatalf("unexpected op %q", s.op)
	case <-time.After(d):
	}
}

func boundPod(name, nodeName string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}},
		Spec:       v1.PodSpec{NodeName: nodeName, Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
}

// TestOpsAndManagerView: what a learner does with kubectl — apply, label,
// a status write, delete, delete --force — produces exactly the kubelet's
// ops, and the pod manager holds what they say.
func TestOpsAndManagerView(t *testing.T) {
	const nodeName = "t09-ops"
	admin := testenv.AdminClient(t)
	testenv.WaitDefaultServiceAccount(t, admin)
	pods := admin.CoreV1().Pods("default")
	ctx := context.Background()
	zero := int64(0)
	t.Cleanup(func() {
		for _, n := range []string{"t09-web", "t09-other", "t09-quick"} {
			_ = pods.Delete(context.Background(), n, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
	})
	events, out := startLab(t, nodeName)
	if s := expectOp(t, events, "ADD"); len(s.pods) != 0 {
		t.Errorf("manager after the empty first list: %v", s.pods)
	}

	// Another node's pod: never seen.
	if _, err := pods.Create(ctx, boundPod("t09-other", "t09-someone-else"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	web, err := pods.Create(ctx, boundPod("t09-web", nodeName), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := expectOp(t, events, "ADD t09-web")
	if p := s.pods["t09-web"]; p == nil || p.UID != web.UID || len(s.pods) != 1 {
		t.Fatalf("manager after ADD: %v", s.pods)
	}

	// kubectl label pod t09-web tier=frontend
	web.Labels["tier"] = "frontend"
	if web, err = pods.Update(ctx, web, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s = expectOp(t, events, "UPDATE t09-web")
	if s.pods["t09-web"].Labels["tier"] != "frontend" {
		t.Errorf("manager after UPDATE: labels %v", s.pods["t09-web"].Labels)
	}

	// Of the kubernetes.io/config.* annotations the kubelet ignores only its
	// own three (config.go:282-286): a changed config.seen is no op at all,
	// a changed config.hash is an UPDATE.
	web.Annotations = map[string]string{kubetypes.ConfigFirstSeenAnnotationKey: "2000-01-01T00:00:00Z"}
	if web, err = pods.Update(ctx, web, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expectNothing(t, events, 2*time.Second)
	web.Annotations[kubetypes.ConfigHashAnnotationKey] = "by-hand"
	if web, err = pods.Update(ctx, web, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s = expectOp(t, events, "UPDATE t09-web")
	if s.pods["t09-web"].Annotations[kubetypes.ConfigHashAnnotationKey] != "by-hand" {
		t.Errorf("manager after the config.hash UPDATE: annotations %v", s.pods["t09-web"].Annotations)
	}

	// kubectl patch --subresource=status: a status the kubelet did not write.
	web.Status.Conditions = []v1.PodCondition{{Type: "example.com/Checked", Status: v1.ConditionTrue}}
	if web, err = pods.UpdateStatus(ctx, web, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s = expectOp(t, events, "RECONCILE t09-web")
	if c := s.pods["t09-web"].Status.Conditions; len(c) != 1 || c[0].Type != "example.com/Checked" {
		t.Errorf("manager after RECONCILE: conditions %v", c)
	}

	// kubectl delete pod t09-web --wait=false: graceful, and it stays.
	if err := pods.Delete(ctx, "t09-web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s = expectOp(t, events, "DELETE t09-web")
	if s.grace == nil || *s.grace != 30 || s.pods["t09-web"] == nil || s.pods["t09-web"].DeletionTimestamp == nil {
		t.Errorf("after a graceful delete: grace %v, manager %v", s.grace, s.pods)
	}
	expectNothing(t, events, 3*time.Second) // nobody finishes the deletion
	if _, err := pods.Get(ctx, "t09-web", metav1.GetOptions{}); err != nil {
		t.Errorf("the pod should still be Terminating: %v", err)
	}

	// kubectl delete pod t09-web --grace-period=0 --force
	if err := pods.Delete(ctx, "t09-web", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	s = expectOp(t, events, "DELETE t09-web")
	if s.grace == nil || *s.grace != 0 {
		t.Errorf("forced delete of a terminating pod: grace %v, want 0 first", s.grace)
	}
	s = expectOp(t, events, "REMOVE t09-web")
	if len(s.pods) != 0 {
		t.Errorf("manager after REMOVE: %v", s.pods)
	}

	// A forced delete of a pod that was not terminating.
	if _, err := pods.Create(ctx, boundPod("t09-quick", nodeName), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expectOp(t, events, "ADD t09-quick")
	if err := pods.Delete(ctx, "t09-quick", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	// Even for a pod that was not terminating, the apiserver first writes
	// deletionTimestamp with grace 0, then removes it.
	s = expectOp(t, events, "DELETE t09-quick")
	if s.grace == nil || *s.grace != 0 {
		t.Errorf("forced delete: grace %v, want 0", s.grace)
	}
	if s = expectOp(t, events, "REMOVE t09-quick"); len(s.pods) != 0 {
		t.Errorf("manager after the forced delete: %v", s.pods)
	}

	// The record make check LAB=09 reads: one line per op (record.go).
	record, err := os.ReadFile(filepath.Join(testenv.NodeDir(t, nodeName), opsRecordFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{" ADD default/t09-web\n", " UPDATE default/t09-web\n", " RECONCILE default/t09-web\n",
		" DELETE default/t09-web grace=30\n", " DELETE default/t09-web grace=0\n", " REMOVE default/t09-web\n"} {
		if !strings.Contains(string(record), line) {
			t.Errorf("%s lacks a line ending %q:\n%s", opsRecordFile, line, record)
		}
	}

	for _, line := range []string{
		"ADD       default/t09-web uid " + string(web.UID),
		"UPDATE    default/t09-web: labels map[app:t09-web tier:frontend] changed",
		"UPDATE    default/t09-web: annotations map[kubernetes.io/config.hash:by-hand] changed",
		"RECONCILE default/t09-web: only the status changed",
		"DELETE    default/t09-web: graceful deletion",
		"grace 30s, deadline (deletionTimestamp)",
		"DELETE    default/t09-web: graceful deletion with grace 0s (a forced delete)",
		"REMOVE    default/t09-web uid " + string(web.UID),
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("output lacks %q", line)
		}
	}
}

// TestMirrorPodWithoutStaticPod: a mirror pod (annotation set, here by the
// admin) is held as a mirror, not as a pod, and is an orphan: this node
// has no static pod of that name.
func TestMirrorPodWithoutStaticPod(t *testing.T) {
	const nodeName = "t09-mirror"
	admin := testenv.AdminClient(t)
	pods := admin.CoreV1().Pods("default")
	events, out := startLab(t, nodeName)
	expectOp(t, events, "ADD")
	mirror := boundPod("t09-static-"+nodeName, nodeName)
	mirror.Annotations = map[string]string{kubetypes.ConfigMirrorAnnotationKey: "0123456789abcdef"}
	zero := int64(0)
	t.Cleanup(func() {
		_ = pods.Delete(context.Background(), mirror.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	if _, err := pods.Create(context.Background(), mirror, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := expectOp(t, events, "ADD "+mirror.Name)
	if len(s.pods) != 0 || fmt.Sprint(s.mirrors) != "["+mirror.Name+"]" || fmt.Sprint(s.orphans) != "["+mirror.Name+"_default]" {
		t.Errorf("pods %v mirrors %v orphans %v", s.pods, s.mirrors, s.orphans)
	}
	if !strings.Contains(out.String(), "orphaned mirror pod "+mirror.Name+"_default") {
		t.Errorf("output does not name the orphan")
	}
	record, err := os.ReadFile(filepath.Join(testenv.NodeDir(t, nodeName), opsRecordFile))
	if want := " ADD default/" + mirror.Name + " mirror\n"; err != nil || !strings.Contains(string(record), want) {
		t.Errorf("%s lacks a line ending %q (%v):\n%s", opsRecordFile, want, err, record)
	}
}

// TestBadInput: clear errors, no hang; bad flags before anything starts.
func TestBadInput(t *testing.T) {
	t.Setenv(state.EnvVar, t.TempDir())
	t.Setenv("KUBECONFIG", "")
	ctx := context.Background()
	discard := labenv.NewPrinter(io.Discard)
	if err := run(ctx, options{nodeName: "lab-node-09", timeout: time.Minute}, discard, nil); err == nil || !strings.Contains(err.Error(), "00-cluster") {
		t.Errorf("no cluster: %v", err)
	}
	for args, want := range map[string]string{
		"--node-name Bad_Name": `--node-name "Bad_Name" is not a valid Node name`,
		"--timeout 0":          "--timeout must be positive",
	} {
		var o options
		var stderr strings.Builder
		code := labenv.Exec(labenv.Lab{Name: "09-pod-manager", Flags: o.flags, Check: o.check,
			Run: func(ctx context.Context, out *labenv.Printer) error { return run(ctx, o, out, nil) }},
			strings.Fields(args), io.Discard, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 and %q", args, code, stderr.String(), want)
		}
	}
}
