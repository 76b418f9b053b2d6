package bootstrap

import (
	"context"
	"fmt"
	"reflect"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
)

// The built-in ClusterRoles a joining node needs; the apiserver creates
// them at start-up (plugin/pkg/auth/authorizer/rbac/bootstrappolicy).
const (
	// NodeBootstrapperRole may create, get, list and watch CSRs.
	NodeBootstrapperRole = "system:node-bootstrapper"
	// NodeClientRole grants "create certificatesigningrequests/nodeclient":
	// the permission the controller-manager's csrapproving controller checks
	// (with a SubjectAccessReview) before it approves a node's first client
	// certificate (pkg/controller/certificates/approver/sarapprove.go).
	NodeClientRole = "system:certificates.k8s.io:certificatesigningrequests:nodeclient"
	// SelfNodeClientRole grants ".../selfnodeclient": a node renewing its own
	// certificate (CSR requester == CN) is approved.
	SelfNodeClientRole = "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"

	// NodesGroup is the group of every node certificate (O=system:nodes).
	NodesGroup = "system:nodes"
)

// NodeBootstrapBindings are the ClusterRoleBindings kubeadm creates in
// cmd/kubeadm/app/phases/bootstraptoken/node/tlsbootstrap.go (v1.36.3):
// AllowBootstrapTokensToPostCSRs, AutoApproveNodeBootstrapTokens and
// AutoApproveNodeCertificateRotation. kubeadm binds the first two to its
// token group; we let every bootstrap token post CSRs but only tokens in
// AutoApproveGroup get them approved automatically (see AutoApproveGroup).
func NodeBootstrapBindings() []rbacv1.ClusterRoleBinding {
	bind := func(name, role, group string) rbacv1.ClusterRoleBinding {
		return rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/part-of": "kubelet-labs"}},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: group}},
		}
	}
	return []rbacv1.ClusterRoleBinding{
		bind("kubelet-labs:kubelet-bootstrap", NodeBootstrapperRole, bootstrapapi.BootstrapDefaultGroup),
		bind("kubelet-labs:node-autoapprove-bootstrap", NodeClientRole, AutoApproveGroup),
		bind("kubelet-labs:node-autoapprove-certificate-rotation", SelfNodeClientRole, NodesGroup),
	}
}

// BindingResult says what EnsureNodeBootstrapRBAC did with one binding.
type BindingResult struct {
	Binding rbacv1.ClusterRoleBinding
	Action  string // "created", "exists" or "updated"
}

// EnsureNodeBootstrapRBAC creates NodeBootstrapBindings; it is idempotent:
// a binding that exists is left alone when it matches, its subjects are
// put right when they do not. A binding whose role differs is an error
// (roleRef cannot be changed; delete the binding).
func EnsureNodeBootstrapRBAC(ctx context.Context, admin kubernetes.Interface) ([]BindingResult, error) {
	crbs := admin.RbacV1().ClusterRoleBindings()
	var out []BindingResult
	for _, want := range NodeBootstrapBindings() {
		_, err := crbs.Create(ctx, &want, metav1.CreateOptions{})
		switch {
		case err == nil:
			out = append(out, BindingResult{want, "created"})
			continue
		case !apierrors.IsAlreadyExists(err):
			return out, fmt.Errorf("create ClusterRoleBinding %s: %w", want.Name, err)
		}
		have, err := crbs.Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return out, fmt.Errorf("get ClusterRoleBinding %s: %w", want.Name, err)
		}
		if have.RoleRef != want.RoleRef {
			return out, fmt.Errorf("ClusterRoleBinding %s exists but binds %s, not %s; delete it (kubectl delete clusterrolebinding %s) and run again",
				want.Name, have.RoleRef.Name, want.RoleRef.Name, want.Name)
		}
		if reflect.DeepEqual(have.Subjects, want.Subjects) {
			out = append(out, BindingResult{*have, "exists"})
			continue
		}
		have.Subjects = want.Subjects
		updated, err := crbs.Update(ctx, have, metav1.UpdateOptions{})
		if err != nil {
			return out, fmt.Errorf("update ClusterRoleBinding %s: %w", want.Name, err)
		}
		out = append(out, BindingResult{*updated, "updated"})
	}
	return out, nil
}
