package status

import (
	"context"
	"net/http"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	kubepod "k8s.io/kubernetes/pkg/kubelet/pod"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/internal/testenv"
)

// nodeGetter reads the test node, for the mirror client's ownerRef.
type nodeGetter struct{ c kubernetes.Interface }

func (g nodeGetter) Get(name string) (*v1.Node, error) {
	return g.c.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
}

// staticPod is what the file source makes of a manifest: the source
// annotation, the hash annotation = UID; the apiserver never has it.
func staticPod(name string) *v1.Pod {
	p := specPod(v1.RestartPolicyAlways, "main")
	p.Name, p.Namespace, p.UID = name, "default", types.UID(name+"-static-uid")
	p.Spec.NodeName = testNode
	p.Annotations = map[string]string{kubetypes.ConfigSourceAnnotationKey: kubetypes.FileSource,
		kubetypes.ConfigHashAnnotationKey: string(p.UID)}
	return p
}

// makeMirror creates the mirror pod of static through the kubelet's own
// mirror client and gives the pod manager the apiserver's copy, as the
// apiserver source would.
func makeMirror(t *testing.T, f *fixture, pm kubepod.Manager, static *v1.Pod) *v1.Pod {
	t.Helper()
	mc := kubepod.NewBasicMirrorClient(f.admin, testNode, nodeGetter{f.admin})
	testenv.PollNil(t, "mirror pod created", time.Minute, func() error { return mc.CreateMirrorPod(context.Background(), static) })
	mirror := getPod(t, f.admin, static.Name)
	if !kubetypes.IsMirrorPod(mirror) {
		t.Fatalf("pod %s has no mirror annotation: %v", mirror.Name, mirror.Annotations)
	}
	pm.AddPod(mirror)
	t.Cleanup(func() {
		_ = f.admin.CoreV1().Pods("default").Delete(context.Background(), static.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	return mirror
}

// TestStaticPodStatusGoesToItsMirror: the status of a static pod is posted
// to its mirror pod once there is one, to the new one when the mirror pod
// is made again, and the final delete never removes a mirror pod.
func TestStaticPodStatusGoesToItsMirror(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	pm := kubepod.NewBasicPodManager()
	f.m = NewManager(f.m.client, f.safety, Options{Log: f.logs.logf, Pods: pm, Mirrors: pm})
	static := staticPod("static-" + testNode)
	pm.AddPod(static)

	// No mirror pod yet: nothing to post to, nothing posted; the status waits.
	f.m.SetPodStatus(static, runningAt(time.Now()))
	if n := f.m.Sync(ctx, true); n != 0 || f.calls.count(http.MethodPatch) != 0 {
		t.Fatalf("without a mirror pod: %d pods synced, %d PATCH; want none", n, f.calls.count(http.MethodPatch))
	}

	mirror := makeMirror(t, f, pm, static)
	if n := f.m.Sync(ctx, false); n != 1 {
		t.Fatalf("with a mirror pod: %d pods synced, want 1", n)
	}
	got := getPod(t, f.admin, static.Name)
	if got.UID != mirror.UID || got.Status.Phase != v1.PodRunning || len(got.Status.ContainerStatuses) != 1 || got.Status.ContainerStatuses[0].State.Running == nil {
		t.Fatalf("mirror pod %s: %s; want the static pod's status, Running [main running]", got.UID, Describe(got.Status))
	}
	if !f.logs.contain("(mirror pod of the static pod) v1 posted: Running") {
		t.Errorf("no log line names the mirror pod")
	}

	// The mirror pod deleted by someone and made again: the apiserver's
	// new object has no status; the next periodic pass posts ours to it,
	// without a status change.
	if err := f.admin.CoreV1().Pods("default").Delete(ctx, static.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	pm.RemovePod(mirror)
	testenv.PollTrue(t, "old mirror pod gone", time.Minute, func() bool {
		_, err := f.admin.CoreV1().Pods("default").Get(ctx, static.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	mirror2 := makeMirror(t, f, pm, static)
	if mirror2.Status.Phase != v1.PodPending {
		t.Fatalf("a new mirror pod starts with phase %s, want Pending", mirror2.Status.Phase)
	}
	if n := f.m.Sync(ctx, true); n != 1 {
		t.Fatalf("after the mirror pod was made again: %d pods synced, want 1", n)
	}
	if got := getPod(t, f.admin, static.Name); got.UID != mirror2.UID || got.Status.Phase != v1.PodRunning {
		t.Fatalf("new mirror pod %s: %s, want Running", got.UID, Describe(got.Status))
	}

	// The mirror pod is being deleted and the static pod ends: a regular
	// pod in that state is deleted for good by the manager (grace 0); a
	// mirror pod never is (canBeDeleted, :1242).
	grace := int64(30)
	if err := f.admin.CoreV1().Pods("default").Delete(ctx, static.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	being := getPod(t, f.admin, static.Name)
	if being.DeletionTimestamp == nil {
		t.Fatal("mirror pod: no deletionTimestamp after a graceful delete")
	}
	pm.UpdatePod(being)
	f.m.SetPodStatus(static, exitedWith(0, "Completed"))
	f.m.TerminatePod(static)
	f.m.Sync(ctx, false)
	f.m.Sync(ctx, true)
	if f.calls.count(http.MethodDelete) != 0 {
		t.Errorf("the status manager deleted a mirror pod")
	}
	if got, err := f.admin.CoreV1().Pods("default").Get(ctx, static.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("mirror pod: %v", err)
	} else if got.Status.Phase != v1.PodSucceeded {
		t.Errorf("mirror pod being deleted: %s, want the static pod's Succeeded", Describe(got.Status))
	}
}

// TestStaticPodWithoutMirrors: without Options.Mirrors, static pods are
// left out, as before the translation existed.
func TestStaticPodWithoutMirrors(t *testing.T) {
	f := setup(t)
	pm := kubepod.NewBasicPodManager()
	static := staticPod("nomirrors-" + testNode)
	pm.AddPod(static)
	makeMirror(t, f, pm, static)
	f.m.SetPodStatus(static, runningAt(time.Now()))
	if n := f.m.Sync(context.Background(), true); n != 0 || f.calls.count(http.MethodPatch) != 0 {
		t.Errorf("static pod without Options.Mirrors: %d synced, %d PATCH; want none", n, f.calls.count(http.MethodPatch))
	}
}
