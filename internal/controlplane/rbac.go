package controlplane

import (
	"context"
	"fmt"

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
