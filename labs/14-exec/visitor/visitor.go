// Package visitor gives lab 14's visitor — a user the cluster CA vouches
// for and RBAC knows nothing about — a client certificate, so a learner can
// knock on the node server with curl: the certificate gets through the
// server's TLS check, and then meets the SubjectAccessReview.
package visitor

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"

	"kubelet-labs/internal/labnames"
	"kubelet-labs/mycore/bootstrap"
)

// User is a user the cluster CA vouches for and RBAC grants nothing.
const User = labnames.Visitor14

// Files are the paths of the visitor's certificate and key (PEM).
type Files struct{ Cert, Key string }

// Credentials gives User a client certificate signed by the cluster CA —
// through the CSR API (signer kubernetes.io/kube-apiserver-client),
// approved with the admin client — and writes key (0600) and certificate
// (visitor.key, visitor.crt) into dir. A pair still valid for ten minutes
// is reused.
func Credentials(ctx context.Context, admin kubernetes.Interface, ca []byte, dir string) (*Files, error) {
	v := &Files{Cert: filepath.Join(dir, "visitor.crt"), Key: filepath.Join(dir, "visitor.key")}
	if pair, err := tls.LoadX509KeyPair(v.Cert, v.Key); err == nil {
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(ca)
		if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			CurrentTime: time.Now().Add(10 * time.Minute)}); err == nil {
			return v, nil
		}
	}
	keyPEM, err := keyutil.MakeEllipticPrivateKeyPEM()
	if err != nil {
		return nil, err
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, err
	}
	der, err := certutil.MakeCSR(key, &pkix.Name{CommonName: User}, nil, nil)
	if err != nil {
		return nil, err
	}
	quiet := klog.NewContext(ctx, logr.Discard())
	day := 24 * time.Hour
	name, uid, err := csr.RequestCertificateWithContext(quiet, admin, der, "", certificatesv1.KubeAPIServerClientSignerName, &day,
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}, key)
	if err != nil {
		return nil, fmt.Errorf("visitor certificate: %w", err)
	}
	if err := bootstrap.SetApproval(ctx, admin, name, true, "KubeletLabsVisitor", "lab 14: a user with a certificate and no RBAC rights"); err != nil {
		return nil, fmt.Errorf("visitor certificate: approve %s: %w", name, err)
	}
	wctx, cancel := context.WithTimeout(quiet, time.Minute)
	defer cancel()
	certPEM, err := csr.WaitForCertificate(wctx, admin, name, uid)
	if err != nil {
		return nil, fmt.Errorf("visitor certificate: CSR %s not issued: %w", name, err)
	}
	if err := os.WriteFile(v.Key, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(v.Cert, certPEM, 0o644); err != nil {
		return nil, err
	}
	return v, nil
}
