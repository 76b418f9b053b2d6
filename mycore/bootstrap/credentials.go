package bootstrap

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// Credentials are a node's files in its state folder (.labs/nodes/NAME/):
// the kubelet keeps the same things in /var/lib/kubelet/pki and
// /etc/kubernetes/kubelet.conf.
type Credentials struct {
	Dir string
	// KeyFile is the private key (0600), CertFile the issued certificate.
	KeyFile, CertFile string
	// PendingKeyFile holds the key while its CSR waits, so a restart reuses
	// the key and finds the same CSR (the kubelet's kubelet-client.key.tmp).
	PendingKeyFile string
	// Kubeconfig embeds server, CA, certificate and key (0600).
	Kubeconfig string
}

// CredentialsIn names the files in dir.
func CredentialsIn(dir string) Credentials {
	return Credentials{
		Dir:            dir,
		KeyFile:        filepath.Join(dir, "kubelet-client.key"),
		CertFile:       filepath.Join(dir, "kubelet-client.crt"),
		PendingKeyFile: filepath.Join(dir, "kubelet-client.key.tmp"),
		Kubeconfig:     filepath.Join(dir, "kubelet.kubeconfig"),
	}
}

// Write stores key, certificate and a kubeconfig that verifies the server
// against caPEM (never insecure-skip-tls-verify).
func (c Credentials) Write(server string, caPEM, certPEM, keyPEM []byte) error {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return err
	}
	if err := keyutil.WriteKey(c.KeyFile, keyPEM); err != nil { // 0600
		return err
	}
	if err := certutil.WriteCert(c.CertFile, certPEM); err != nil {
		return err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["default-cluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	kc.AuthInfos["default-auth"] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	kc.Contexts["default-context"] = &clientcmdapi.Context{Cluster: "default-cluster", AuthInfo: "default-auth"}
	kc.CurrentContext = "default-context"
	tmp := c.Kubeconfig + ".tmp"
	if err := clientcmd.WriteToFile(*kc, tmp); err != nil { // 0600
		return err
	}
	return os.Rename(tmp, c.Kubeconfig)
}

// ErrNoCredentials: the node has no usable credentials yet.
var ErrNoCredentials = errors.New("no node credentials")

// Check says whether the stored credentials can be used as they are, like
// the kubelet's isClientConfigStillValid (pkg/kubelet/certificate/bootstrap/
// bootstrap.go, v1.36.3, which only checks the validity period), and
// stricter: the kubeconfig must point at server, hold one certificate and
// the key that belongs to it, the certificate must be for nodeName and be a
// client certificate that chains to caPEM and is valid now (a certificate
// of another cluster, or an expired one, is useless here).
//
// Every "not usable" error wraps ErrNoCredentials, and the x509 error
// behind it when there is one (x509.UnknownAuthorityError,
// x509.CertificateInvalidError with Reason x509.Expired, ...). A missing
// kubeconfig is ErrNoCredentials itself.
func (c Credentials) Check(nodeName, server string, caPEM []byte) (*x509.Certificate, error) {
	kc, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoCredentials
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCredentials, err)
	}
	if len(kc.Clusters) != 1 || len(kc.AuthInfos) != 1 {
		return nil, fmt.Errorf("%w: %s has %d clusters and %d users, want one of each", ErrNoCredentials, c.Kubeconfig, len(kc.Clusters), len(kc.AuthInfos))
	}
	var certPEM, keyPEM []byte
	for _, cl := range kc.Clusters {
		if cl.Server != server {
			return nil, fmt.Errorf("%w: %s is for %s, not %s", ErrNoCredentials, c.Kubeconfig, cl.Server, server)
		}
	}
	for _, a := range kc.AuthInfos {
		certPEM, keyPEM = a.ClientCertificateData, a.ClientKeyData
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, fmt.Errorf("%w: certificate and key in %s: %w", ErrNoCredentials, c.Kubeconfig, err)
	}
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCredentials, err)
	}
	cert := certs[0]
	if want := NodeSubject(nodeName).CommonName; cert.Subject.CommonName != want {
		return nil, fmt.Errorf("%w: certificate is for %s, not %s", ErrNoCredentials, cert.Subject.CommonName, want)
	}
	if err := VerifyClientCert(cert, caPEM); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCredentials, err)
	}
	return cert, nil
}

// VerifyClientCert checks that cert is a client certificate signed by the
// CA in caPEM and valid now.
func VerifyClientCert(cert *x509.Certificate, caPEM []byte) error {
	pool, err := certutil.NewPoolFromBytes(caPEM)
	if err != nil {
		return err
	}
	_, err = cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: time.Now(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err
}

// RESTConfig loads the node's kubeconfig.
func (c Credentials) RESTConfig() (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
}

// WriteBootstrapKubeconfig writes what the kubelet's --bootstrap-kubeconfig
// holds: the server, its CA, and the bootstrap token (0600). It is a
// password until the token expires: keep it in the state folder, never in git.
func WriteBootstrapKubeconfig(path, server string, caPEM []byte, tok Token) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["default-cluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	kc.AuthInfos["tls-bootstrap-token-user"] = &clientcmdapi.AuthInfo{Token: tok.String()}
	kc.Contexts["tls-bootstrap-token-user@kubernetes"] = &clientcmdapi.Context{Cluster: "default-cluster", AuthInfo: "tls-bootstrap-token-user"}
	kc.CurrentContext = "tls-bootstrap-token-user@kubernetes"
	tmp := path + ".tmp"
	if err := clientcmd.WriteToFile(*kc, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
