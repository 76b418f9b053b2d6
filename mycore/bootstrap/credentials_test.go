package bootstrap

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// testCA is a throw-away certificate authority for credential tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: name}, key)
	if err != nil {
		t.Fatal(err)
	}
	return testCA{cert: cert, key: key, pem: pemCert(cert.Raw)}
}

// leaf issues a certificate for subject, valid from notBefore to notAfter,
// with the given extended key usages; it returns certificate and key PEM.
func (ca testCA) leaf(t *testing.T, subject pkix.Name, notBefore, notAfter time.Time, usages ...x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: subject, NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usages,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err = keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	return pemCert(der), keyPEM
}

// TestCheckReusesOnlyMatchingCredentials: the stored credentials of a node
// are reused only when they are for this server, this node, this cluster's
// CA, a client certificate, valid now, with the key that belongs to the
// certificate. Each case is what a learner meets: lab 00 restarted on
// another port, the same folder used for another node name, a cluster
// recreated with a new CA, a certificate that expired.
func TestCheckReusesOnlyMatchingCredentials(t *testing.T) {
	const server, node = "https://127.0.0.1:6443", "n1"
	ca := newTestCA(t, "cluster-ca")
	other := newTestCA(t, "another-cluster-ca")
	now := time.Now()
	valid := func() ([]byte, []byte) {
		return ca.leaf(t, NodeSubject(node), now.Add(-time.Hour), now.Add(time.Hour), x509.ExtKeyUsageClientAuth)
	}
	goodCert, goodKey := valid()
	_, strayKey := valid()

	issue := func(n string, from, to time.Duration, usage x509.ExtKeyUsage) func() ([]byte, []byte) {
		return func() ([]byte, []byte) { return ca.leaf(t, NodeSubject(n), now.Add(from), now.Add(to), usage) }
	}
	good := func() ([]byte, []byte) { return goodCert, goodKey }
	const noReason = x509.InvalidReason(-1)

	for name, tc := range map[string]struct {
		writeServer   string
		creds         func() (certPEM, keyPEM []byte)
		checkCA       []byte
		wantErr       string // "" = reused
		wantUnknownCA bool
		wantReason    x509.InvalidReason
	}{
		"valid: reused":        {server, good, ca.pem, "", false, noReason},
		"another server":       {"https://127.0.0.1:16443", good, ca.pem, "is for https://127.0.0.1:16443, not " + server, false, noReason},
		"another node's cert":  {server, issue("n2", -time.Hour, time.Hour, x509.ExtKeyUsageClientAuth), ca.pem, "certificate is for system:node:n2, not system:node:n1", false, noReason},
		"signed by another CA": {server, good, other.pem, "certificate signed by unknown authority", true, noReason},
		"expired":              {server, issue(node, -2*time.Hour, -time.Hour, x509.ExtKeyUsageClientAuth), ca.pem, "certificate has expired", false, x509.Expired},
		"not yet valid":        {server, issue(node, time.Hour, 2*time.Hour, x509.ExtKeyUsageClientAuth), ca.pem, "not yet valid", false, x509.Expired},
		"serving, not client":  {server, issue(node, -time.Hour, time.Hour, x509.ExtKeyUsageServerAuth), ca.pem, "incompatible key usage", false, noReason},
		"key of another cert":  {server, func() ([]byte, []byte) { return goodCert, strayKey }, ca.pem, "private key does not match public key", false, noReason},
	} {
		t.Run(name, func(t *testing.T) {
			certPEM, keyPEM := tc.creds()
			c := CredentialsIn(filepath.Join(t.TempDir(), "nodes", node))
			if err := c.Write(tc.writeServer, ca.pem, certPEM, keyPEM); err != nil {
				t.Fatal(err)
			}
			cert, err := c.Check(node, server, tc.checkCA)
			if tc.wantErr == "" {
				if err != nil || cert.Subject.CommonName != "system:node:"+node {
					t.Fatalf("valid credentials refused: %v", err)
				}
				return
			}
			if cert != nil || !errors.Is(err, ErrNoCredentials) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want ErrNoCredentials saying %q", err, tc.wantErr)
			}
			var unknown x509.UnknownAuthorityError
			if got := errors.As(err, &unknown); got != tc.wantUnknownCA {
				t.Errorf("errors.As(x509.UnknownAuthorityError) = %v, want %v", got, tc.wantUnknownCA)
			}
			var invalid x509.CertificateInvalidError
			if tc.wantReason != noReason && (!errors.As(err, &invalid) || invalid.Reason != tc.wantReason) {
				t.Errorf("err = %v, want an x509.CertificateInvalidError with reason %v", err, tc.wantReason)
			}
			t.Logf("refused: %v", err)
		})
	}
}

func TestCheckWithoutCredentials(t *testing.T) {
	c := CredentialsIn(filepath.Join(t.TempDir(), "nodes", "n1"))
	if _, err := c.Check("n1", "https://127.0.0.1:6443", nil); err != ErrNoCredentials {
		t.Errorf("err = %v, want ErrNoCredentials itself (nothing to explain)", err)
	}
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: certutil.CertificateBlockType, Bytes: der})
}
