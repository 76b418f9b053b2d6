package main

import (
	"context"
	"fmt"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
)

// leaseStopped: a ValidatingAdmissionPolicy, as a cluster's operators
// might add for a "maintenance window", refuses every write of the node's
// Lease. The kubelet keeps trying (its log says why it fails); the node
// lifecycle controller sees no renewal for --node-monitor-grace-period
// (30 s on lab 00) and sets Ready=Unknown (node_lifecycle_controller.go).
// The kubelet's own node status writes still pass, so the node may come
// back Ready for a moment after each: it flaps. Fixed when the node's own
// Lease update is admitted again (a server-side dry run as the node).
var leaseStopped = &Scenario{
	Name:      "lease-stopped",
	Lab:       "02-node-lease",
	Summary:   "a running node that the cluster says is NotReady",
	NeedsNode: true,
	Break: func(ctx context.Context, env *Env, rec *Record) error {
		labels := map[string]string{faultLabel: "lease-stopped"}
		policy := &admissionv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: leasePolicy, Labels: labels},
			Spec: admissionv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: ptr(admissionv1.Fail),
				MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionv1.RuleWithOperations{
						Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
						Rule:       admissionv1.Rule{APIGroups: []string{"coordination.k8s.io"}, APIVersions: []string{"*"}, Resources: []string{"leases"}},
					},
				}}},
				Validations: []admissionv1.Validation{{
					Expression: fmt.Sprintf("object.metadata.namespace != '%s' || object.metadata.name != '%s'", v1.NamespaceNodeLease, rec.Node),
					Message:    "writes are paused during the maintenance window",
				}},
			},
		}
		binding := &admissionv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: leasePolicy, Labels: labels},
			Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName:        leasePolicy,
				ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			},
		}
		ar := env.Admin.AdmissionregistrationV1()
		if _, err := ar.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
			return err
		}
		if _, err := ar.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			return err
		}
		// The apiserver compiles a new policy a moment after it is
		// stored: wait until the node's next renewal would be refused.
		if err := env.waitFor(ctx, "the change to take effect", func(ctx context.Context) (bool, error) {
			err := leaseUpdateAsNode(ctx, env, rec.Node)
			return err != nil && !apierrors.IsNotFound(err), nil
		}); err != nil {
			return err
		}
		env.Out.Printf("changed the cluster so that node %s's heartbeats no longer land; the node itself runs on", rec.Node)
		env.Out.Printf("in about 30 s (lab 00's --node-monitor-grace-period) the cluster will say so")
		return nil
	},
	LookFirst: func(rec Record) []string {
		return []string{
			fmt.Sprintf("kubectl get node %s -w                 (for a minute)", rec.Node),
			fmt.Sprintf("kubectl describe node %s               (Conditions, and Lease: RenewTime)", rec.Node),
			fmt.Sprintf("kubectl get lease -n kube-node-lease %s -o yaml -w", rec.Node),
			"the node's log: what happens each time it renews its Lease",
		}
	},
	Check: func(ctx context.Context, env *Env, rec Record) (Result, error) {
		var r Result
		if n, err := env.Admin.CoreV1().Nodes().Get(ctx, rec.Node, metav1.GetOptions{}); err == nil {
			for _, c := range n.Status.Conditions {
				if c.Type == v1.NodeReady {
					r.see("node %s: Ready=%s (%s) since %s", rec.Node, c.Status, c.Reason, c.LastTransitionTime.UTC().Format(time.TimeOnly))
				}
			}
		}
		l, err := env.Admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, rec.Node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			r.see("node %s has no Lease in %s: is the node running?", rec.Node, v1.NamespaceNodeLease)
			return r, nil
		}
		if err != nil {
			return r, err
		}
		age, renewed := leaseAge(l, env.Now())
		if renewed {
			r.see("Lease %s/%s last renewed %s ago (a running node renews it every 10 s)", v1.NamespaceNodeLease, rec.Node, age.Round(time.Second))
		}
		if err := leaseUpdateAsNode(ctx, env, rec.Node); err != nil {
			r.see("the node's next renewal would fail: %v", err)
			return r, nil
		}
		r.see("the node's next renewal would be accepted (a server-side dry run as system:node:%s)", rec.Node)
		// Admitted is not yet renewed: fixed once the node's heartbeat
		// lands again, which a running node's next renewal does.
		if !renewed || age > leaseFresh {
			r.see("but the node has not renewed it since: is it still running? (it retries every 10 s; check again in a moment)")
			return r, nil
		}
		r.Fixed = true
		return r, nil
	},
	Undo: func(ctx context.Context, env *Env, rec Record) error {
		ar := env.Admin.AdmissionregistrationV1()
		if err := ignoreNotFound(ar.ValidatingAdmissionPolicyBindings().Delete(ctx, leasePolicy, metav1.DeleteOptions{})); err != nil {
			return err
		}
		return ignoreNotFound(ar.ValidatingAdmissionPolicies().Delete(ctx, leasePolicy, metav1.DeleteOptions{}))
	},
}

// leasePolicy names the policy and its binding as an operator might.
const leasePolicy = "maintenance-window"

// leaseUpdateAsNode updates the node's Lease as the node would renew it,
// but as a server-side dry run (nothing is stored; admission runs): the
// Node authorizer, NodeRestriction and every admission policy say yes or
// no as they would to the kubelet.
func leaseUpdateAsNode(ctx context.Context, env *Env, node string) error {
	// The node renews between our read and our write now and then: that
	// conflict says nothing about admission, so read again.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error { return leaseDryRun(ctx, env, node) })
}

func leaseDryRun(ctx context.Context, env *Env, node string) error {
	l, err := env.Admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:node:" + node, Groups: []string{"system:nodes", "system:authenticated"}}
	asNode, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	now := metav1.NewMicroTime(env.Now())
	l.Spec.RenewTime = &now
	_, err = asNode.CoordinationV1().Leases(v1.NamespaceNodeLease).Update(ctx, l, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

func ptr[T any](v T) *T { return &v }
