package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"

	"kubelet-labs/mycore/bootstrap"
)

// csrPending: the ClusterRoleBinding that lets the controller-manager's
// csrapproving controller approve a joining node's first client
// certificate is gone. The controller approves only when a
// SubjectAccessReview says the CSR's requester may "create
// certificatesigningrequests/nodeclient" (sarapprove.go); now it says no,
// and the CSR stays Pending, as does the node that asked. The break posts
// such a CSR itself, with a bootstrap token, as a joining kubelet would.
// Fixed when the approver would approve the next one and no CSR of the
// break is still Pending.
var csrPending = &Scenario{
	Name:    "csr-pending",
	Lab:     "04-csr",
	Summary: "a joining node whose certificate request nobody answers",
	Break: func(ctx context.Context, env *Env, rec *Record) error {
		crbs := env.Admin.RbacV1().ClusterRoleBindings()
		// The token must be able to post a CSR at all (lab 03's bindings).
		if _, err := bootstrap.EnsureNodeBootstrapRBAC(ctx, env.Admin); err != nil {
			return err
		}
		list, err := crbs.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, b := range list.Items {
			if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.Name != bootstrap.NodeClientRole {
				continue
			}
			if err := ignoreNotFound(crbs.Delete(ctx, b.Name, metav1.DeleteOptions{})); err != nil {
				return err
			}
			rec.Removed = append(rec.Removed, b)
		}
		tok, err := bootstrap.CreateToken(ctx, env.Admin, bootstrap.TokenOptions{
			TTL: time.Hour, Description: "kubelet-labs fault csr-pending: a joining node's token", ExtraGroups: []string{bootstrap.AutoApproveGroup},
		})
		if err != nil {
			return err
		}
		rec.Token = tok.ID
		// The authorizer reads bindings through an informer: wait until
		// it, too, no longer sees the one just removed.
		if err := env.waitFor(ctx, "the approver's permission to be gone", func(ctx context.Context) (bool, error) {
			ok, _, err := approverWouldApprove(ctx, env.Admin, tok.ID)
			return err == nil && !ok, err
		}); err != nil {
			return err
		}
		if _, err := bootstrap.AuthenticateToken(ctx, env.Config, tok, env.Admin, 30*time.Second); err != nil {
			return err
		}
		name, err := postNodeCSR(ctx, env, tok)
		if err != nil {
			return err
		}
		env.Out.Printf("a node %s is joining: with bootstrap token %s (user %s) it posted CertificateSigningRequest %s, as a kubelet does at its first start", csrNode, tok.Redacted(), tok.User(), name)
		return nil
	},
	LookFirst: func(rec Record) []string {
		return []string{
			"kubectl get csr                         (CONDITION; REQUESTOR)",
			"kubectl describe csr NAME",
			"lab 04's README: who approves a node's first CSR, and how it decides",
			"kubectl get clusterrolebindings -o wide   (compare with what lab 03 set up)",
		}
	},
	Check: func(ctx context.Context, env *Env, rec Record) (Result, error) {
		var r Result
		ok, why, err := approverWouldApprove(ctx, env.Admin, rec.Token)
		if err != nil {
			return r, err
		}
		user := "system:bootstrap:" + rec.Token
		if ok {
			r.see("the approver would approve the next node's CSR: %s may create certificatesigningrequests/nodeclient (%s)", user, why)
		} else {
			if why == "" {
				why = "no RBAC rule allows it"
			}
			r.see("the next node to join with a token like %s would wait too: its CSR would not be approved (%s)", user, why)
		}
		csrs, err := env.Admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{LabelSelector: faultLabel + "=csr-pending"})
		if err != nil {
			return r, err
		}
		pending := 0
		for _, c := range csrs.Items {
			state := csrState(&c)
			if state == "Pending" {
				pending++
			}
			r.see("CSR %s of node %s: %s", c.Name, csrNode, state)
		}
		r.Fixed = ok && pending == 0
		return r, nil
	},
	Undo: func(ctx context.Context, env *Env, rec Record) error {
		crbs := env.Admin.RbacV1().ClusterRoleBindings()
		for _, b := range rec.Removed {
			b := rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: b.Name, Labels: b.Labels, Annotations: b.Annotations}, RoleRef: b.RoleRef, Subjects: b.Subjects}
			if _, err := crbs.Create(ctx, &b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
		csrs := env.Admin.CertificatesV1().CertificateSigningRequests()
		if err := csrs.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: faultLabel + "=csr-pending"}); err != nil {
			return err
		}
		if rec.Token != "" {
			tok := bootstrap.Token{ID: rec.Token}
			return ignoreNotFound(env.Admin.CoreV1().Secrets(metav1.NamespaceSystem).Delete(ctx, tok.SecretName(), metav1.DeleteOptions{}))
		}
		return nil
	},
}

// csrNode is the name the joining node asks a certificate for.
const csrNode = "faults-joiner"

// approverWouldApprove asks the question the csrapproving controller asks
// for a node's first client certificate (sarapprove.go authorize): may the
// requester — the token's user, in its groups — create the subresource
// nodeclient of certificatesigningrequests?
func approverWouldApprove(ctx context.Context, admin kubernetes.Interface, tokenID string) (bool, string, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   "system:bootstrap:" + tokenID,
		Groups: []string{"system:bootstrappers", bootstrap.AutoApproveGroup, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Group: "certificates.k8s.io", Resource: "certificatesigningrequests", Subresource: "nodeclient", Verb: "create",
		},
	}}
	got, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, "", err
	}
	return got.Status.Allowed, got.Status.Reason, nil
}

// postNodeCSR posts a node client CSR as the token, as the kubelet's TLS
// bootstrap does (certificate/bootstrap/bootstrap.go requestNodeCertificate):
// subject system:node:NAME in system:nodes, the kubelet's signer and usages,
// the name a hash of key, subject and usages.
func postNodeCSR(ctx context.Context, env *Env, tok bootstrap.Token) (string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	subject := bootstrap.NodeSubject(csrNode)
	der, err := certutil.MakeCSR(key, &subject, nil, nil)
	if err != nil {
		return "", err
	}
	usages := bootstrap.NodeClientUsages(key)
	name, err := bootstrap.NodeCSRName(&key.PublicKey, subject, usages)
	if err != nil {
		return "", err
	}
	asToken, err := kubernetes.NewForConfig(bootstrap.TokenConfig(env.Config, tok.String()))
	if err != nil {
		return "", err
	}
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{faultLabel: "csr-pending"}},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: der, SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName, Usages: usages,
		},
	}
	if _, err := asToken.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("post the joining node's CSR as %s: %w", tok.User(), err)
	}
	return name, nil
}

// csrState is kubectl get csr's CONDITION column.
func csrState(c *certificatesv1.CertificateSigningRequest) string {
	state := ""
	for _, cond := range c.Status.Conditions {
		if state != "" {
			state += ","
		}
		state += string(cond.Type)
	}
	if len(c.Status.Certificate) > 0 {
		state += ",Issued"
	}
	if state == "" {
		return "Pending"
	}
	return state
}
