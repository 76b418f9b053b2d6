package podconfig

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubepod "k8s.io/kubernetes/pkg/kubelet/pod"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
)

func basePod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1", ResourceVersion: "1",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"team": "a"}},
		Spec:   v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: "nginx"}}},
		Status: v1.PodStatus{Phase: v1.PodPending},
	}
}

// TestClassify: the op table of checkAndUpdatePod.
func TestClassify(t *testing.T) {
	now := metav1.Now()
	grace := int64(30)
	shorter := int64(5)
	cases := []struct {
		name   string
		change func(p *v1.Pod)
		want   string // "" = no op
	}{
		{"nothing", func(p *v1.Pod) {}, ""},
		{"resourceVersion only (a resync)", func(p *v1.Pod) { p.ResourceVersion = "2" }, ""},
		{"kubelet's own annotations only", func(p *v1.Pod) {
			p.Annotations[kubetypes.ConfigSourceAnnotationKey] = "api"
			p.Annotations[kubetypes.ConfigFirstSeenAnnotationKey] = "x"
		}, ""},
		{"status only", func(p *v1.Pod) { p.Status.Phase = v1.PodRunning }, "RECONCILE"},
		{"spec", func(p *v1.Pod) { p.Spec.Containers[0].Image = "nginx:2" }, "UPDATE"},
		{"labels", func(p *v1.Pod) { p.Labels["tier"] = "x" }, "UPDATE"},
		{"a user annotation", func(p *v1.Pod) { p.Annotations["team"] = "b" }, "UPDATE"},
		{"a user annotation removed", func(p *v1.Pod) { delete(p.Annotations, "team") }, "UPDATE"},
		{"spec and status: the update wins", func(p *v1.Pod) {
			p.Spec.Containers[0].Image = "nginx:2"
			p.Status.Phase = v1.PodRunning
		}, "UPDATE"},
		{"deletionTimestamp set", func(p *v1.Pod) { p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &grace }, "DELETE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old, ref := basePod(), basePod()
			c.change(ref)
			op, ok := Classify(old, ref)
			got := ""
			if ok {
				got = OpName(op)
			}
			if got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}

	// Already terminating: a shorter grace period is DELETE again, a
	// status write on the terminating pod is RECONCILE.
	deleting := basePod()
	deleting.DeletionTimestamp, deleting.DeletionGracePeriodSeconds = &now, &grace
	ref := deleting.DeepCopy()
	ref.DeletionGracePeriodSeconds = &shorter
	if op, ok := Classify(deleting, ref); !ok || op != kubetypes.DELETE {
		t.Errorf("shorter grace: %s %v, want DELETE", OpName(op), ok)
	}
	ref = deleting.DeepCopy()
	ref.Status.Phase = v1.PodFailed
	if op, ok := Classify(deleting, ref); !ok || op != kubetypes.RECONCILE {
		t.Errorf("status while terminating: %s %v, want RECONCILE", OpName(op), ok)
	}
}

// recorder remembers which handler method got which pods.
type recorder struct{ calls []string }

func (r *recorder) add(m string, pods []*v1.Pod) {
	for _, p := range pods {
		m += " " + p.Name
	}
	r.calls = append(r.calls, m)
}
func (r *recorder) HandlePodAdditions(_ context.Context, p []*v1.Pod) { r.add("additions", p) }
func (r *recorder) HandlePodUpdates(_ context.Context, p []*v1.Pod)   { r.add("updates", p) }
func (r *recorder) HandlePodRemoves(_ context.Context, p []*v1.Pod)   { r.add("removes", p) }
func (r *recorder) HandlePodReconcile(_ context.Context, p []*v1.Pod) { r.add("reconcile", p) }

// TestDispatch: syncLoopIteration's switch; DELETE goes to HandlePodUpdates.
func TestDispatch(t *testing.T) {
	p := []*v1.Pod{basePod()}
	r := &recorder{}
	for _, op := range []kubetypes.PodOperation{kubetypes.ADD, kubetypes.UPDATE, kubetypes.DELETE, kubetypes.RECONCILE, kubetypes.REMOVE} {
		if err := Dispatch(context.Background(), kubetypes.PodUpdate{Op: op, Pods: p, Source: kubetypes.ApiserverSource}, r); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"additions web", "updates web", "updates web", "reconcile web", "removes web"}
	if !reflect.DeepEqual(r.calls, want) {
		t.Errorf("calls %q, want %q", r.calls, want)
	}
	if err := Dispatch(context.Background(), kubetypes.PodUpdate{Op: 42}, r); err == nil {
		t.Error("an unknown op was dispatched")
	}
}

// TestManagerHandler: additions are stored oldest first, a mirror pod is
// paired with its static pod by full name, and removing the mirror only
// drops the pairing.
func TestManagerHandler(t *testing.T) {
	pm := kubepod.NewBasicPodManager()
	h := ManagerHandler{Pods: pm}
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	newer, older := basePod(), basePod()
	newer.Name, newer.UID, newer.CreationTimestamp = "b", "ub", metav1.NewTime(t0.Add(time.Minute))
	older.Name, older.UID, older.CreationTimestamp = "a", "ua", metav1.NewTime(t0)
	batch := []*v1.Pod{newer, older}
	h.HandlePodAdditions(ctx, batch)
	if batch[0].Name != "a" {
		t.Errorf("additions not sorted by creation time: %s first", batch[0].Name)
	}

	static := basePod()
	static.Name, static.UID = "etcd-n1", "hash1"
	static.Annotations = map[string]string{kubetypes.ConfigSourceAnnotationKey: kubetypes.FileSource, kubetypes.ConfigHashAnnotationKey: "hash1"}
	mirror := static.DeepCopy()
	mirror.UID = "m1"
	mirror.Annotations = map[string]string{kubetypes.ConfigSourceAnnotationKey: kubetypes.ApiserverSource, kubetypes.ConfigMirrorAnnotationKey: "hash1"}
	h.HandlePodAdditions(ctx, []*v1.Pod{static})
	h.HandlePodAdditions(ctx, []*v1.Pod{mirror})

	if got, ok := pm.GetMirrorPodByPod(static); !ok || got.UID != "m1" || !kubepod.IsMirrorPodOf(got, static) {
		t.Errorf("mirror of static: %v %v", got, ok)
	}
	if got := pm.TranslatePodUID("m1"); got != "hash1" {
		t.Errorf("TranslatePodUID(mirror) = %s, want the static pod's UID", got)
	}
	if len(pm.GetPods()) != 3 { // mirror pods are not "pods" of the manager
		t.Errorf("GetPods: %d, want 3 (a, b, the static pod)", len(pm.GetPods()))
	}
	h.HandlePodRemoves(ctx, []*v1.Pod{mirror})
	if _, ok := pm.GetMirrorPodByPod(static); ok {
		t.Error("mirror still paired after its REMOVE")
	}
	if _, ok := pm.GetPodByUID(types.UID("hash1")); !ok {
		t.Error("removing the mirror removed the static pod")
	}
}

// TestLineLogger: errors and enabled infos become one line each; V above
// the level is dropped; a repeated line is printed once per window.
func TestLineLogger(t *testing.T) {
	var lines []string
	log := LineLogger(func(l string) { lines = append(lines, l) }, 0, time.Hour)
	bad := errors.New("invalid pod: name is needed for the pod")
	log.Error(bad, "Could not process manifest file", "path", "/m/bad.yaml")
	log.Error(bad, "Could not process manifest file", "path", "/m/bad.yaml") // the next relist
	log.V(3).Info("Reading config file", "path", "/m/ok.yaml")
	log.WithName("mirror").Info("Creating a mirror pod")
	want := []string{
		"Could not process manifest file: invalid pod: name is needed for the pod (path=/m/bad.yaml)",
		"mirror: Creating a mirror pod",
	}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("lines %q, want %q", lines, want)
	}
}
