package mirror

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	kubepod "k8s.io/kubernetes/pkg/kubelet/pod"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/node"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// staticPod is what the file source makes of a manifest "web": the name
// with the node appended, a UID that is the hash of the file, the hash
// annotation, the source annotation, bound to the node.
func staticPod(nodeName, hash string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-" + nodeName, Namespace: "default", UID: types.UID(hash),
			Annotations: map[string]string{kubetypes.ConfigHashAnnotationKey: hash, kubetypes.ConfigSourceAnnotationKey: kubetypes.FileSource}},
		Spec: v1.PodSpec{NodeName: nodeName, Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
}

func verbs(actions []Action) string {
	var s []string
	for _, a := range actions {
		if a.Err != nil {
			s = append(s, string(a.Verb)+"!"+a.Err.Error())
		} else {
			s = append(s, string(a.Verb))
		}
	}
	return strings.Join(s, ",")
}

func mustVerbs(t *testing.T, actions []Action, want string) {
	t.Helper()
	if got := verbs(actions); got != want {
		t.Fatalf("actions %q, want %q: %v", got, want, actions)
	}
}

// getMirror reads the mirror pod as the apiserver source would deliver it.
func getMirror(t *testing.T, c kubernetes.Interface, name string) *v1.Pod {
	t.Helper()
	p, err := c.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Annotations[kubetypes.ConfigSourceAnnotationKey] = kubetypes.ApiserverSource
	return p
}

// TestMirrorLifecycle: create, keep, replace after an edit, replace when
// deleted by someone, delete when the static pod is gone — as the node,
// through NodeRestriction.
func TestMirrorLifecycle(t *testing.T) {
	ctx := context.Background()
	cfg := testenv.AdminConfig(t)
	admin := testenv.AdminClient(t)
	t.Setenv(state.EnvVar, t.TempDir())
	const nodeName = "t-mirror-node"
	j, err := node.Join(ctx, node.JoinOptions{Admin: cfg, Dir: testenv.NodeDir(t, nodeName), Name: nodeName, Lab: "test-mirror"})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()

	pm := kubepod.NewBasicPodManager()
	r := &Reconciler{NodeName: nodeName, Pods: pm, Client: NewClient(j.Client, nodeName), Nodes: NodeGetter{Client: j.Client}}
	name := "web-" + nodeName
	t.Cleanup(func() {
		zero := int64(0)
		_ = admin.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})

	// 1. A static pod without a mirror: create it.
	static := staticPod(nodeName, "1111111111aaaa")
	pm.AddPod(static)
	mustVerbs(t, r.Reconcile(ctx), "create")
	m1 := getMirror(t, admin, name)
	if m1.Annotations[kubetypes.ConfigMirrorAnnotationKey] != "1111111111aaaa" || !kubepod.IsMirrorPodOf(m1, static) {
		t.Errorf("mirror annotations %v", m1.Annotations)
	}
	if len(m1.OwnerReferences) != 1 {
		t.Fatalf("owner references %+v, want exactly one", m1.OwnerReferences)
	}
	if o := m1.OwnerReferences[0]; o.Kind != "Node" || o.Name != nodeName || o.UID != j.Node.UID || o.Controller == nil || !*o.Controller {
		t.Errorf("owner %+v, want controller Node/%s uid %s", o, nodeName, j.Node.UID)
	}

	// Before the apiserver source delivers it, another pass finds the name
	// taken and waits.
	mustVerbs(t, r.SyncStaticPods(ctx), "skip")

	// 2. The apiserver source delivers it: nothing to do.
	pm.AddPod(m1)
	mustVerbs(t, r.Reconcile(ctx), "")
	if got := pm.TranslatePodUID(m1.UID); got != kubetypes.ResolvedPodUID(static.UID) {
		t.Errorf("mirror uid translates to %s", got)
	}

	// 3. The manifest is edited: new hash, new static pod UID. The old
	// mirror is deleted (by its UID) and a new one made.
	pm.RemovePod(static)
	static = staticPod(nodeName, "2222222222bbbb")
	pm.AddPod(static)
	actions := r.Reconcile(ctx)
	mustVerbs(t, actions, "delete,create")
	if !strings.Contains(actions[0].Reason, "11111111") || !strings.Contains(actions[0].Reason, "22222222") {
		t.Errorf("replace reason %q should name both hashes", actions[0].Reason)
	}
	m2 := getMirror(t, admin, name)
	if m2.UID == m1.UID || m2.Annotations[kubetypes.ConfigMirrorAnnotationKey] != "2222222222bbbb" {
		t.Errorf("after the edit: uid %s (was %s) hash %s", m2.UID, m1.UID, m2.Annotations[kubetypes.ConfigMirrorAnnotationKey])
	}
	pm.UpdatePod(m2)

	// A stale view (the old mirror still in the manager) deletes nothing:
	// the UID precondition protects the new mirror.
	stale := r.SyncStatic(ctx, static, m1)
	mustVerbs(t, stale, "skip")
	if _, err := admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Fatalf("the new mirror was deleted through a stale UID: %v", err)
	}

	// 4. Somebody deletes the mirror (kubectl delete): it is Terminating,
	// nobody but the node may finish that; the node replaces it.
	if err := admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	terminating := getMirror(t, admin, name)
	if terminating.DeletionTimestamp == nil {
		t.Fatalf("a bound pod deleted with a grace period should be Terminating first")
	}
	pm.UpdatePod(terminating)
	mustVerbs(t, r.Reconcile(ctx), "delete,create")
	m3 := getMirror(t, admin, name)
	if m3.UID == m2.UID || m3.DeletionTimestamp != nil {
		t.Errorf("recreated mirror uid %s (was %s), deletionTimestamp %v", m3.UID, m2.UID, m3.DeletionTimestamp)
	}
	pm.UpdatePod(m3)

	// 5. The manifest is removed: the mirror is an orphan and goes.
	pm.RemovePod(static)
	mustVerbs(t, r.Reconcile(ctx), "delete-orphan")
	if _, err := admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("orphan still there: %v", err)
	}
}

// wrongUID is a node getter that reports another UID for the Node.
type wrongUID struct{}

func (wrongUID) Get(name string) (*v1.Node, error) {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "00000000-0000-0000-0000-000000000000"}}, nil
}

// TestNodeRestrictionRules: what the mirror client does right is what
// NodeRestriction checks — a node may create only mirror pods, bound to
// itself, owned by its own Node with the right UID.
func TestNodeRestrictionRules(t *testing.T) {
	ctx := context.Background()
	t.Setenv(state.EnvVar, t.TempDir())
	const nodeName = "t-mirror-rules"
	j, err := node.Join(ctx, node.JoinOptions{Admin: testenv.AdminConfig(t), Dir: testenv.NodeDir(t, nodeName), Name: nodeName, Lab: "test-mirror"})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	static := staticPod(nodeName, "3333333333cccc")

	plain := static.DeepCopy()
	plain.Annotations = nil
	if _, err := j.Client.CoreV1().Pods("default").Create(ctx, plain, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node created a pod without the mirror annotation: %v", err)
	}
	err = kubepod.NewBasicMirrorClient(j.Client, nodeName, wrongUID{}).CreateMirrorPod(ctx, static)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "UID mismatch") {
		t.Errorf("mirror owned by a wrong Node UID: %v, want Forbidden (UID mismatch)", err)
	}
	other := staticPod("some-other-node", "4444444444dddd")
	if err := NewClient(j.Client, nodeName).CreateMirrorPod(ctx, other); !apierrors.IsForbidden(err) {
		t.Errorf("node created a mirror pod bound to another node: %v", err)
	}
}
