package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kubelet-labs/internal/labnames"
	"kubelet-labs/mycore/lease"
)

func init() {
	register("05", labCheck{Title: "register a node: TLS bootstrap, Node, status, lease", Check: checkLab05})
}

const (
	lab05Node  = labnames.Node05
	lab05Start = "start the lab and leave it running: go run ./labs/05-register-node (README, Run it)"
)

func checkLab05(ctx context.Context, e *Env) []Result {
	kube, caPEM, err := e.ClusterCA(ctx)
	if err != nil {
		return NoCluster(err)
	}
	node, err := kube.CoreV1().Nodes().Get(ctx, lab05Node, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return NoCluster(err)
	}
	if err != nil {
		node = nil
	}
	return []Result{
		nodeCredentials(ctx, kube, e.StatePath("nodes", lab05Node), lab05Node, e.Server(), caPEM, lab05Start),
		lab05Ready(node),
		lab05Lease(ctx, kube, node, time.Now()),
		lab05Labeled(node),
	}
}

// lab05Ready: the Node exists and its Ready condition, set by the lab, is
// True; the node lifecycle controller turns it Unknown once the lab stops.
func lab05Ready(n *corev1.Node) Result {
	if n == nil {
		return NotYet("no Node "+lab05Node, lab05Start)
	}
	if c := readyCondition(n); c != nil {
		if c.Status == corev1.ConditionTrue {
			return Done("Node %s registered and Ready (%s)", n.Name, c.Reason)
		}
		return NotYet(fmt.Sprintf("Node %s is Ready=%s (%s): nobody heartbeats for it", n.Name, c.Status, c.Reason), lab05Start)
	}
	return NotYet("Node "+lab05Node+" has no Ready condition: its status was never posted", lab05Start)
}

// lab05Lease: the node's Lease, owned by the Node, renewed recently
// enough that the lab must be running: within one renew interval (a
// quarter of the lease duration) and a little slack for jitter and
// latency.
func lab05Lease(ctx context.Context, kube kubernetes.Interface, n *corev1.Node, now time.Time) Result {
	l, err := kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, lab05Node, metav1.GetOptions{})
	if err != nil {
		return NotYet("no Lease "+corev1.NamespaceNodeLease+"/"+lab05Node+": "+err.Error(), lab05Start)
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != lab05Node || l.Spec.LeaseDurationSeconds == nil || l.Spec.RenewTime == nil {
		return NotYet("Lease "+lab05Node+" has no holder, duration or renew time", lab05Start)
	}
	owned := n != nil && len(l.OwnerReferences) == 1 && l.OwnerReferences[0].Kind == "Node" && l.OwnerReferences[0].UID == n.UID
	if !owned {
		return NotYet("Lease "+lab05Node+" is not owned by the Node "+lab05Node, lab05Start)
	}
	duration := time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	renew := lease.RenewInterval(duration)
	age := now.Sub(l.Spec.RenewTime.Time).Round(100 * time.Millisecond)
	if age > renew+renew/2+2*time.Second {
		return NotYet(fmt.Sprintf("Lease %s/%s was last renewed %s ago, though it is renewed every %s: the lab is not running", corev1.NamespaceNodeLease, lab05Node, age, renew), lab05Start)
	}
	return Done("Lease %s/%s held by %s, owned by its Node, %s: renewed %s ago (every %s)",
		corev1.NamespaceNodeLease, lab05Node, *l.Spec.HolderIdentity, duration, age, renew)
}

// lab05Labeled: the node labeled its own Node (README, A node cannot
// touch another node).
func lab05Labeled(n *corev1.Node) Result {
	const key, want = "example.com/mine", "yes"
	hint := "run the README's first block in A node cannot touch another node (kubectl --kubeconfig …/kubelet.kubeconfig label node " + lab05Node + " " + key + "=" + want + ")"
	if n == nil {
		return NotYet("no Node "+lab05Node+" to label", hint)
	}
	if n.Labels[key] != want {
		return NotYet(fmt.Sprintf("Node %s has no label %s=%s", lab05Node, key, want), hint)
	}
	return Done("Node %s labeled %s=%s", lab05Node, key, want)
}
