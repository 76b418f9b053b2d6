package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"

	"kubelet-labs/mycore/bootstrap"
)

// TestCSRNameOfMatchesTheLabs: the check finds a node's CSR by the name the
// lab gave it; computed from the public key alone, it must be the same.
func TestCSRNameOfMatchesTheLabs(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	want, err := bootstrap.NodeCSRName(key.Public(), bootstrap.NodeSubject("n1"), bootstrap.NodeClientUsages(key))
	if err != nil {
		t.Fatal(err)
	}
	got, err := csrNameOf(key.Public(), "n1")
	if err != nil || got != want {
		t.Errorf("csrNameOf = %q, %v; the lab names it %q", got, err, want)
	}
	if other, _ := csrNameOf(key.Public(), "n2"); other == want {
		t.Errorf("another node's CSR of the same key has the same name %q", other)
	}
}

func TestCSRConditionAsKubectlShowsIt(t *testing.T) {
	c := &certificatesv1.CertificateSigningRequest{}
	if got := csrCondition(c); got != "Pending" {
		t.Errorf("no condition: %q, want Pending", got)
	}
	c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}
	c.Status.Certificate = []byte("x")
	if got := csrCondition(c); got != "Approved,Issued" {
		t.Errorf("approved and issued: %q", got)
	}
}
