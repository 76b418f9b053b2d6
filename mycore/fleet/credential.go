package fleet

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/klog/v2"

	"kubelet-labs/mycore/bootstrap"
)

// IdentityUser is who the fleet is when a request names no node: the user
// of the client certificate ensureIdentity issues. It is bound to one
// ClusterRole per fleet prefix (IdentityRole).
const IdentityUser = "kubelet-labs:fleet"

// IdentityRole is the name of the ClusterRole (and of the binding of
// IdentityUser to it) that lets a fleet with this prefix act as its nodes.
func IdentityRole(prefix string) string { return IdentityUser + ":" + prefix }

// ShardRole is the ClusterRole of one shard of a fleet (IdentityRole
// without shards): each shard writes its own, with its own nodes' names,
// so shards starting at once never overwrite each other's. They share the
// user IdentityUser, which so may act as the nodes of every shard — one
// fleet, one identity.
func ShardRole(prefix string, shard, shards int) string {
	if shards == 0 {
		return IdentityRole(prefix)
	}
	return fmt.Sprintf("%s:shard-%d-of-%d", IdentityRole(prefix), shard, shards)
}

// identityRules are all IdentityUser may do for a fleet of these nodes:
//
//   - list and watch nodes, cluster-wide: the shared Node informer the
//     status reporters read. Not get, not any write, and no pods: each
//     node watches its own pods as itself, as a kubelet does.
//   - impersonate exactly these users: system:node:NAME for each of the
//     fleet's nodes, listed one by one. RBAC resourceNames match whole
//     names only — there is no system:node:* — and leaving them out would
//     allow impersonating ANY user name: system:kube-controller-manager,
//     for one, is bound by user name to a role that may get, create,
//     update and delete any Secret (plugin/pkg/auth/authorizer/rbac/
//     bootstrappolicy/policy.go:473-483 and :701, v1.36.3).
//   - impersonate the group system:nodes, and no other group: no
//     system:masters, so an impersonated name never gets more than a node.
//
// What an impersonated node may then do is decided as for a real kubelet:
// the Node authorizer (its own Node, Lease, and the pods bound to it) and
// NodeRestriction admission. So the most this credential can do is what
// these kubelets could do with certificates of their own — against
// system:masters, which may do anything, unchecked by RBAC, admission's
// node rules, or priority and fairness.
//
// (Kubernetes 1.36 also has constrained impersonation, beta: the verb
// impersonate:arbitrary-node on nodes, where the apiserver itself sets the
// groups to system:nodes, and impersonate-on:arbitrary-node:VERB to limit
// what the impersonated node may do. The rules here use the older
// impersonate verb, which every apiserver version knows, and are as
// narrow: exact user names, one group.)
//
// A thousand names make a ClusterRole of some 30 KB; the RBAC authorizer
// compares resourceNames one by one, a few microseconds per request.
func identityRules(names []string) []rbacv1.PolicyRule {
	users := make([]string, len(names))
	for i, n := range names {
		users[i] = "system:node:" + n
	}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"users"}, Verbs: []string{"impersonate"}, ResourceNames: users},
		{APIGroups: []string{""}, Resources: []string{"groups"}, Verbs: []string{"impersonate"}, ResourceNames: []string{"system:nodes"}},
	}
}

// ensureIdentity uses admin once, at start, to make the fleet its own,
// narrow credential, and returns that credential: it creates (or puts
// right) ClusterRole name (IdentityRole or ShardRole) with identityRules(names) and
// its binding to IdentityUser, then issues a client certificate for
// IdentityUser through a CSR to the kubernetes.io/kube-apiserver-client
// signer, approved with admin (as `kubectl certificate approve`). The
// private key is made here and never leaves the process's memory: the
// certificate is of no use to anyone once the fleet stops, and its rights
// are the binding's (delete the binding, and it may do nothing). It has
// the signer's default lifetime (the controller-manager's
// --cluster-signing-duration, a year by default), so a fleet that runs
// for days needs no renewal. One role per prefix (and shard): two fleets
// with different prefixes on one cluster do not take each other's nodes
// away.
func ensureIdentity(ctx context.Context, admin *rest.Config, name string, names []string) (*rest.Config, error) {
	client, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{"app.kubernetes.io/part-of": "kubelet-labs"}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Rules: identityRules(names)}
	// Read first, then create or update: a fleet started again (a shard
	// restarted, the next benchmark round) finds both objects, and a
	// create that meets them would be a 409 in the apiserver's count of
	// conflicts, which fleet mode is measured by.
	roles := client.RbacV1().ClusterRoles()
	have, err := roles.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = roles.Create(ctx, role, metav1.CreateOptions{})
	case err == nil && !equality.Semantic.DeepEqual(have.Rules, role.Rules):
		// Another run of this prefix, maybe with another number of nodes.
		have.Rules = role.Rules
		_, err = roles.Update(ctx, have, metav1.UpdateOptions{})
	}
	if err != nil {
		return nil, identityErr(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: IdentityUser}},
	}
	bindings := client.RbacV1().ClusterRoleBindings()
	hasBinding, err := bindings.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = bindings.Create(ctx, binding, metav1.CreateOptions{})
	case err == nil && hasBinding.RoleRef != binding.RoleRef:
		return nil, fmt.Errorf("fleet identity: ClusterRoleBinding %s exists with role %s/%s, want ClusterRole %s; delete it (kubectl delete clusterrolebinding %s)", name, hasBinding.RoleRef.Kind, hasBinding.RoleRef.Name, name, name)
	case err == nil && !slices.Equal(hasBinding.Subjects, binding.Subjects):
		hasBinding.Subjects = binding.Subjects // no one else gets this role
		_, err = bindings.Update(ctx, hasBinding, metav1.UpdateOptions{})
	}
	if err != nil {
		return nil, identityErr(err)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := certutil.MakeCSR(key, &pkix.Name{CommonName: IdentityUser}, nil, nil)
	if err != nil {
		return nil, err
	}
	// An ECDSA key signs, it cannot encipher: digital signature and client
	// auth are what the signer accepts for it
	// (pkg/controller/certificates/signer/signer.go:273-305, v1.36.3).
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	quiet := klog.NewContext(ctx, logr.Discard())
	csrName, uid, err := csr.RequestCertificateWithContext(quiet, client, der, "", certificatesv1.KubeAPIServerClientSignerName, nil, usages, key)
	if err != nil {
		return nil, identityErr(err)
	}
	// The CSR has done its job once the certificate is in our memory.
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = client.CertificatesV1().CertificateSigningRequests().Delete(dctx, csrName, metav1.DeleteOptions{})
	}()
	if err := bootstrap.SetApproval(ctx, client, csrName, true, "KubeletLabsFleet",
		"the fleet's own identity ("+IdentityUser+"), approved by kubelet-labs with the admin client"); err != nil {
		return nil, identityErr(err)
	}
	wctx, cancel := context.WithTimeout(quiet, 2*time.Minute)
	defer cancel()
	certPEM, err := csr.WaitForCertificate(wctx, client, csrName, uid)
	if err != nil {
		return nil, fmt.Errorf("fleet identity: CSR %s was approved but no certificate came within 2m (is the controller-manager's csrsigning controller running?): %w", csrName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	cfg := rest.AnonymousClientConfig(admin) // same server, same trusted CA, no admin credential
	cfg.CertData = certPEM
	cfg.KeyData = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	return cfg, nil
}

func identityErr(err error) error {
	return fmt.Errorf("fleet identity: set up %s with the kubeconfig's credential (it must be allowed to create ClusterRoles and their bindings and approve CSRs, as the admin is; or use --shared-identity): %w", IdentityUser, err)
}
