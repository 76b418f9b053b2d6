package controlplane

import (
	"context"
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ensureKubeletClientRBAC lets the apiserver's kubelet-client identity use
// the kubelet API (exec, logs, port-forward), through the built-in
// system:kubelet-api-admin role — the binding kubeadm creates in
// cmd/kubeadm/app/phases/bootstraptoken/node/tlsbootstrap.go (v1.36.3).
// Kubelets authorize the apiserver with a
// SubjectAccessReview, so without it `kubectl exec` gets 403 from the node.
func (cp *ControlPlane) ensureKubeletClientRBAC(ctx context.Context) error {
	client, err := cp.AdminClient()
	if err != nil {
		return err
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kubelet-labs:apiserver-kubelet-api-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: APIServerKubeletClientUser}},
	}
	_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create RBAC for the apiserver's kubelet client: %w (log: %s)", err, cp.LogFile("kube-apiserver"))
	}
	return nil
}

// waitControllersRun waits for the ServiceAccount "default" in namespace
// "default": the serviceaccount controller makes it once the
// controller-manager's controllers run, a second or so after its /healthz
// says ok. Until then the apiserver's ServiceAccount admission refuses
// every pod in that namespace, so "ready" means after it (a learner who
// creates a pod, or runs make check LAB=00, at once would see it missing).
func (cp *ControlPlane) waitControllersRun(ctx context.Context, timeout time.Duration) error {
	client, err := cp.AdminClient()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-controller-manager is healthy, but its serviceaccount controller made no ServiceAccount default/default in %s (%v); log: %s", timeout, err, cp.LogFile("kube-controller-manager"))
		case <-cp.kcm.done:
			return cp.kcm.exitError()
		case <-tick.C:
		}
	}
}
