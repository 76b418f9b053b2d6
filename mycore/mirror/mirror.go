// Package mirror keeps one mirror pod in the apiserver for every static
// pod of the node, as the kubelet does (Kubernetes v1.36.3):
//
//   - tryReconcileMirrorPods (pkg/kubelet/kubelet.go:3470-3505), which
//     SyncPod runs on every sync of a static pod (kubelet.go:2185-2186):
//     create the mirror pod if it is missing; if it is being deleted or
//     no longer matches the static pod (its kubernetes.io/config.mirror
//     hash differs from the static pod's kubernetes.io/config.hash, i.e.
//     the manifest was edited), delete it — only that one, by UID — and
//     create it again;
//   - the orphan cleanup of HandlePodCleanups (pkg/kubelet/kubelet_pods.go:
//     1317-1329), run every housekeeping period (2 s, kubelet.go:183):
//     delete mirror pods whose static pod is gone.
//
// The writes go through the kubelet's own mirror client,
// pod.NewBasicMirrorClient (pkg/kubelet/pod/mirror_client.go:61), which
// sets the mirror annotation and the one controller ownerRef to the Node
// (with its UID) that the NodeRestriction admission plugin demands of a
// node creating a pod (plugin/pkg/admission/noderestriction/admission.go:
// 277-336).
package mirror

import (
	"context"
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kubepod "k8s.io/kubernetes/pkg/kubelet/pod"
)

// NodeGetter reads the Node from the apiserver each time: the mirror
// client needs its UID for the ownerRef, and reconcile must not create
// mirror pods for a Node that is being deleted. (The kubelet reads both
// from its Node informer; a Get keeps the labs free of one more informer.)
type NodeGetter struct {
	Client  kubernetes.Interface
	Timeout time.Duration // per Get; 0 = 10s
}

// Get implements the nodeGetter the mirror client asks for.
func (g NodeGetter) Get(name string) (*v1.Node, error) {
	timeout := g.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return g.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

// NewClient is the kubelet's mirror client for node nodeName; client must
// authenticate as system:node:NAME.
func NewClient(client kubernetes.Interface, nodeName string) kubepod.MirrorClient {
	return kubepod.NewBasicMirrorClient(client, nodeName, NodeGetter{Client: client})
}

// Verb says what a reconcile did to one mirror pod.
type Verb string

const (
	Created       Verb = "create"        // the static pod had no mirror pod
	Replaced      Verb = "delete"        // mismatching or terminating mirror deleted (by UID); created again in the same pass
	DeletedOrphan Verb = "delete-orphan" // the static pod is gone
	Skipped       Verb = "skip"          // nothing written, see Reason
)

// Action is one thing a reconcile did (or could not do).
type Action struct {
	Verb Verb
	Pod  string // full name, "name_namespace" as the kubelet writes it
	// Reason explains the action in one line.
	Reason string
	Err    error
}

func (a Action) String() string {
	s := fmt.Sprintf("%-13s %s: %s", a.Verb, a.Pod, a.Reason)
	if a.Err != nil {
		s += fmt.Sprintf(" (error: %v)", a.Err)
	}
	return s
}

// Reconciler pairs a pod manager with a mirror client.
type Reconciler struct {
	NodeName string
	// Pods is the pod manager: static pods come from the file source,
	// mirror pods from the apiserver source.
	Pods   kubepod.Manager
	Client kubepod.MirrorClient
	// Nodes tells whether the Node is being deleted (default: none is).
	Nodes interface {
		Get(name string) (*v1.Node, error)
	}
}

// Reconcile runs SyncStaticPods, then DeleteOrphans: one pass of what the
// kubelet spreads over pod syncs and housekeeping.
func (r *Reconciler) Reconcile(ctx context.Context) []Action {
	return append(r.SyncStaticPods(ctx), r.DeleteOrphans(ctx)...)
}

// SyncStaticPods runs SyncStatic for every static pod in the pod manager,
// as the kubelet's SyncPod does for each static pod it syncs.
func (r *Reconciler) SyncStaticPods(ctx context.Context) []Action {
	pairs := r.Pods.GetStaticPodToMirrorPodMap()
	statics := make([]*v1.Pod, 0, len(pairs))
	for s := range pairs {
		statics = append(statics, s)
	}
	sort.Slice(statics, func(i, j int) bool { return statics[i].Name < statics[j].Name })
	var actions []Action
	for _, s := range statics {
		actions = append(actions, r.SyncStatic(ctx, s, pairs[s])...)
	}
	return actions
}

// DeleteOrphans deletes the mirror pods the pod manager holds without a
// static pod of the same full name (kubelet_pods.go:1317-1329). The kubelet
// skips those whose static pod is still terminating in the pod workers;
// without workers nothing is terminating here.
func (r *Reconciler) DeleteOrphans(ctx context.Context) []Action {
	_, _, orphans := r.Pods.GetPodsAndMirrorPods()
	sort.Strings(orphans)
	var actions []Action
	for _, fullName := range orphans {
		ok, err := r.Client.DeleteMirrorPod(ctx, fullName, nil)
		a := Action{Verb: DeletedOrphan, Pod: fullName, Reason: "no static pod of that name on this node", Err: err}
		if err == nil && !ok {
			a.Verb, a.Reason = Skipped, "orphaned mirror pod already gone"
		}
		actions = append(actions, a)
	}
	return actions
}
