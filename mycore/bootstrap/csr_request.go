package bootstrap

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	certutil "k8s.io/client-go/util/cert"
)

// This file is the csr-request build-it stage: the node's client
// certificate request, built as the kubelet's requestNodeCertificate builds
// it (pkg/kubelet/certificate/bootstrap/bootstrap.go:317-398, v1.36.3), and
// the test that ends the wait for it, as client-go's WaitForCertificate
// makes it (k8s.io/client-go v0.36.3 util/certificate/csr/csr.go:244-308).
// RequestNodeCertificate (csr.go) posts and watches with them.

// NodeSubject is the subject of every kubelet client certificate
// (bootstrap.go:318-321): Organization ["system:nodes"] (NodesGroup) puts
// the node in that group, and CommonName "system:node:" + nodeName is the
// user the Node authorizer and NodeRestriction read the node's name from.
//
//stage:csr-request
func NodeSubject(nodeName string) pkix.Name {
	return pkix.Name{Organization: []string{NodesGroup}, CommonName: "system:node:" + nodeName}
}

// NodeClientUsages are the key usages a kubelet asks for
// (bootstrap.go:332-338): digital signature and client auth, in that
// order, plus key encipherment for an *rsa.PrivateKey only — an ECDSA key
// cannot encipher anything (TLS key exchange with it is ECDHE + signature).
// The signer accepts both sets (IsKubeletClientCSR in
// pkg/apis/certificates/helpers.go).
//
//stage:csr-request
func NodeClientUsages(key crypto.PrivateKey) []certificatesv1.KeyUsage {
	u := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	if _, ok := key.(*rsa.PrivateKey); ok {
		u = append(u, certificatesv1.UsageKeyEncipherment)
	}
	return u
}

// NodeCSRName is the kubelet's digestedName (bootstrap.go:368-398): the
// same key, subject and usages always give the same name, so a restarted
// kubelet finds its earlier CSR instead of posting a second one. It is
// "node-csr-" + the unpadded base64url (base64.RawURLEncoding) of a
// SHA-512/256 hash over, in order: the public key in PKIX DER
// (x509.MarshalPKIXPublicKey), the subject's CommonName, each
// Organization, each usage — every piece written as its own unpadded
// base64url text followed by '|' (not in that alphabet: no two inputs give
// the same stream).
//
//stage:csr-request
func NodeCSRName(pub crypto.PublicKey, subject pkix.Name, usages []certificatesv1.KeyUsage) (string, error) {
	h := sha512.New512_256()
	write := func(b []byte) {
		h.Write([]byte(base64.RawURLEncoding.EncodeToString(b)))
		h.Write([]byte{'|'})
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	write(der)
	write([]byte(subject.CommonName))
	for _, o := range subject.Organization {
		write([]byte(o))
	}
	for _, u := range usages {
		write([]byte(u))
	}
	return "node-csr-" + base64.RawURLEncoding.EncodeToString(h.Sum(nil)), nil
}

// newNodeCSR is the CertificateSigningRequest a kubelet posts for
// nodeName's client certificate (bootstrap.go:317-351, with the object
// client-go builds from those arguments at csr.go:62-79):
//   - spec.request: a PEM "CERTIFICATE REQUEST" signed by key, with subject
//     NodeSubject(nodeName) (certutil.MakeCSR does both);
//   - spec.usages: NodeClientUsages(key);
//   - spec.signerName: kubernetes.io/kube-apiserver-client-kubelet
//     (certificatesv1.KubeAPIServerClientKubeletSignerName);
//   - metadata.name: NodeCSRName of key's public key, that subject and
//     those usages;
//   - spec.expirationSeconds: only when expirationSeconds is not 0 (the
//     kubelet asks for nothing and gets the signer's maximum).
//
// Username and groups are left empty: the apiserver fills them in with
// the requester's identity.
//
//stage:csr-request
func newNodeCSR(key crypto.Signer, nodeName string, expirationSeconds int32) (*certificatesv1.CertificateSigningRequest, error) {
	subject := NodeSubject(nodeName)
	der, err := certutil.MakeCSR(key, &subject, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("make CSR: %w", err)
	}
	usages := NodeClientUsages(key)
	name, err := NodeCSRName(key.Public(), subject, usages)
	if err != nil {
		return nil, err
	}
	obj := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    der,
			Usages:     usages,
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
		},
	}
	if expirationSeconds != 0 {
		obj.Spec.ExpirationSeconds = &expirationSeconds
	}
	return obj, nil
}

// csrIssued decides, for one state of the CSR seen while waiting, whether
// the wait is over (csr.go:253-278): an error when the CSR is not the one
// we posted (its UID is not uid: it was deleted and made again), or when
// any condition is Denied or Failed (say its reason and message); the
// certificate and done=true when it is Approved and status.certificate is
// not empty; otherwise (pending, or approved but not yet signed)
// done=false and no error: keep waiting.
//
//stage:csr-request
func csrIssued(obj *certificatesv1.CertificateSigningRequest, uid types.UID) (cert []byte, done bool, err error) {
	if obj.UID != uid {
		return nil, false, fmt.Errorf("csr %q changed UIDs", obj.Name)
	}
	approved := false
	for _, c := range obj.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateDenied:
			return nil, false, fmt.Errorf("certificate signing request is denied, reason: %v, message: %v", c.Reason, c.Message)
		case certificatesv1.CertificateFailed:
			return nil, false, fmt.Errorf("certificate signing request failed, reason: %v, message: %v", c.Reason, c.Message)
		case certificatesv1.CertificateApproved:
			approved = true
		}
	}
	if approved && len(obj.Status.Certificate) > 0 {
		return obj.Status.Certificate, true, nil
	}
	return nil, false, nil
}
