package mirror

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
)

// fakeClient is a kubepod.MirrorClient that writes nothing: it records
// each call as one line and answers what the case says.
type fakeClient struct {
	calls     []string
	deleted   bool  // DeleteMirrorPod's first result
	deleteErr error // and its error
	createErr error
}

func (f *fakeClient) CreateMirrorPod(_ context.Context, pod *v1.Pod) error {
	f.calls = append(f.calls, fmt.Sprintf("CreateMirrorPod(%s/%s)", pod.Namespace, pod.Name))
	return f.createErr
}

func (f *fakeClient) DeleteMirrorPod(_ context.Context, fullName string, uid *types.UID) (bool, error) {
	u := "nil"
	if uid != nil {
		u = string(*uid)
	}
	f.calls = append(f.calls, fmt.Sprintf("DeleteMirrorPod(%s, uid=%s)", fullName, u))
	return f.deleted, f.deleteErr
}

// fakeNodes answers Get with a Node, being deleted or not, or an error.
type fakeNodes struct {
	deleting bool
	err      error
}

func (f fakeNodes) Get(name string) (*v1.Node, error) {
	if f.err != nil {
		return nil, f.err
	}
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "node-uid"}}
	if f.deleting {
		now := metav1.Now()
		n.DeletionTimestamp = &now
	}
	return n, nil
}

// mirrorOf is the mirror pod the apiserver source delivers for a static
// pod whose manifest had hash.
func mirrorOf(nodeName, hash string, uid types.UID) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-" + nodeName, Namespace: "default", UID: uid,
		Annotations: map[string]string{
			kubetypes.ConfigMirrorAnnotationKey: hash,
			kubetypes.ConfigHashAnnotationKey:   hash,
			kubetypes.ConfigSourceAnnotationKey: kubetypes.ApiserverSource,
		}}}
}

func terminating(p *v1.Pod) *v1.Pod {
	p = p.DeepCopy()
	now := metav1.Now()
	p.DeletionTimestamp = &now
	return p
}

// TestSyncStatic: SyncStatic against a fake mirror client — which writes
// it makes, in which order, and what it reports — case by case as
// upstream's tryReconcileMirrorPods decides (pkg/kubelet/kubelet.go:
// 3470-3505, v1.36.3).
func TestSyncStatic(t *testing.T) {
	const node = "n1"
	const full = "web-n1_default" // kubecontainer.GetPodFullName: name_namespace
	static := staticPod(node, "2222222222bbbb")
	apiPod := static.DeepCopy()
	apiPod.Annotations[kubetypes.ConfigSourceAnnotationKey] = kubetypes.ApiserverSource
	current := mirrorOf(node, "2222222222bbbb", "m-new")
	edited := mirrorOf(node, "1111111111aaaa", "m-old")
	exists := apierrors.NewAlreadyExists(schema.GroupResource{Resource: "pods"}, "web-n1")
	boom := errors.New("connection refused")

	for _, tc := range []struct {
		name          string
		static        *v1.Pod
		mirror        *v1.Pod
		client        fakeClient
		nodes         *fakeNodes // nil: Reconciler.Nodes unset
		wantCalls     string     // the client's calls, "; "-separated
		wantVerbs     string     // the Actions' verbs; "!" marks one with Err
		upstream, why string     // where upstream decides it, and what it does
	}{
		{name: "no mirror pod: create it", static: static, nodes: &fakeNodes{},
			wantCalls: "CreateMirrorPod(default/web-n1)", wantVerbs: "create",
			upstream: "kubelet.go:3492-3500", why: "tryReconcileMirrorPods: a static pod without a mirror pod gets one: mirrorPod == nil → CreateMirrorPod(staticPod)"},
		{name: "no mirror pod, no Nodes getter: create it", static: static,
			wantCalls: "CreateMirrorPod(default/web-n1)", wantVerbs: "create",
			upstream: "kubelet.go:3492-3500", why: "the Node check is skipped when Reconciler.Nodes is nil, then CreateMirrorPod(staticPod)"},
		{name: "matching mirror pod: nothing", static: static, mirror: current, nodes: &fakeNodes{},
			wantCalls: "", wantVerbs: "",
			upstream: "kubelet.go:3478-3479, 3492", why: "a mirror pod that IsMirrorPodOf the static pod and is not being deleted is left alone: no delete, no create"},
		{name: "not a static pod: nothing", static: apiPod, nodes: &fakeNodes{},
			wantCalls: "", wantVerbs: "",
			upstream: "kubelet.go:3474-3476", why: "a pod whose source is the apiserver (kubetypes.IsStaticPod false) has no mirror pod: return at once"},
		{name: "manifest edited: delete by UID, then create", static: static, mirror: edited, client: fakeClient{deleted: true}, nodes: &fakeNodes{},
			wantCalls: "DeleteMirrorPod(" + full + ", uid=m-old); CreateMirrorPod(default/web-n1)", wantVerbs: "delete,create",
			upstream: "kubelet.go:3479-3488, 3492-3500", why: "a mirror pod whose config.mirror hash is not the static pod's config.hash is deleted with its own UID as precondition, and, deleted, made again"},
		{name: "mirror pod terminating: delete by UID, then create", static: static, mirror: terminating(current), client: fakeClient{deleted: true}, nodes: &fakeNodes{},
			wantCalls: "DeleteMirrorPod(" + full + ", uid=m-new); CreateMirrorPod(default/web-n1)", wantVerbs: "delete,create",
			upstream: "kubelet.go:3479-3488, 3492-3500", why: "a mirror pod with a deletionTimestamp (kubectl delete) is deleted with its UID as precondition and made again"},
		{name: "stale mirror already gone: no create", static: static, mirror: edited, client: fakeClient{deleted: false}, nodes: &fakeNodes{},
			wantCalls: "DeleteMirrorPod(" + full + ", uid=m-old)", wantVerbs: "skip",
			upstream: "kubelet.go:3484-3492", why: "DeleteMirrorPod returning false (NotFound or another UID: mirror_client.go:134-143) leaves deleted false, so nothing is created in this pass"},
		{name: "delete fails: no create", static: static, mirror: edited, client: fakeClient{deleteErr: boom}, nodes: &fakeNodes{},
			wantCalls: "DeleteMirrorPod(" + full + ", uid=m-old)", wantVerbs: "delete!connection refused",
			upstream: "kubelet.go:3484-3485, 3492", why: "a failed delete is reported (logged upstream) and nothing is created"},
		{name: "node being deleted: no create", static: static, nodes: &fakeNodes{deleting: true},
			wantCalls: "", wantVerbs: "skip",
			upstream: "kubelet.go:3493-3497", why: "no mirror pod is created for a Node with a deletionTimestamp"},
		{name: "node unreadable: no create", static: static, nodes: &fakeNodes{err: boom},
			wantCalls: "", wantVerbs: "skip!connection refused",
			upstream: "kubelet.go:3493-3495", why: "when the Node cannot be read, no mirror pod is created and the error is reported"},
		{name: "create fails: reported", static: static, client: fakeClient{createErr: boom}, nodes: &fakeNodes{},
			wantCalls: "CreateMirrorPod(default/web-n1)", wantVerbs: "create!connection refused",
			upstream: "kubelet.go:3500-3501", why: "CreateMirrorPod's error is reported (logged upstream)"},
		{name: "create finds the name taken: skip", static: static, client: fakeClient{createErr: exists}, nodes: &fakeNodes{},
			wantCalls: "CreateMirrorPod(default/web-n1)", wantVerbs: "skip",
			upstream: "pod/mirror_client.go:100-106", why: "the mirror client passes AlreadyExists on; it means a mirror pod of that name is there already, and the next pass compares it once the apiserver source delivers it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := tc.client
			r := &Reconciler{NodeName: node, Client: &client}
			if tc.nodes != nil {
				r.Nodes = *tc.nodes
			}
			actions := r.SyncStatic(context.Background(), tc.static, tc.mirror)
			calls := strings.Join(client.calls, "; ")
			if calls != tc.wantCalls {
				t.Errorf("SyncStatic made the calls [%s], want [%s]: %s (upstream: pkg/kubelet/%s, v1.36.3)",
					calls, tc.wantCalls, tc.why, tc.upstream)
			}
			if got := verbs(actions); got != tc.wantVerbs {
				t.Errorf("SyncStatic's actions %q, want %q (%v): %s (upstream: pkg/kubelet/%s, v1.36.3)",
					got, tc.wantVerbs, actions, tc.why, tc.upstream)
			}
			for _, a := range actions {
				if a.Pod != full {
					t.Errorf("action %v names pod %q, want the static pod's full name %q (kubecontainer.GetPodFullName, as kubelet.go:3483)", a, a.Pod, full)
				}
				if a.Reason == "" {
					t.Errorf("action %v has no Reason: say in one line why", a)
				}
			}
		})
	}
}
