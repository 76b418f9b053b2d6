package controlplane

import (
	"crypto"
	"crypto/x509"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"time"

	certutil "k8s.io/client-go/util/cert"
	kubeadmapi "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm"
	"k8s.io/kubernetes/cmd/kubeadm/app/util/pkiutil"
)

// Names of the certificate/key pairs under PKI.Dir ("<name>.crt", "<name>.key").
const (
	CAName     = "ca"      // cluster CA: client CA of the apiserver and the kubelets, CSR signer
	EtcdCAName = "etcd-ca" // etcd has its own CA so a node's CSR-issued cert can never reach etcd
	// FrontProxyCAName signs only the client certificate the apiserver's
	// aggregator presents to extension apiservers, which trust it for the
	// X-Remote-User headers (kubeadm: constants.go:135, 142).
	FrontProxyCAName            = "front-proxy-ca"
	frontProxyClientName        = "front-proxy-client"
	apiserverName               = "apiserver"
	apiserverKubeletClientName  = "apiserver-kubelet-client"
	apiserverEtcdClientName     = "apiserver-etcd-client"
	etcdServerName              = "etcd-server"
	adminName                   = "admin"
	controllerManagerName       = "controller-manager"
	controllerManagerServerName = "controller-manager-serving"
	serviceAccountKeyName       = "sa"

	// APIServerKubeletClientUser is the user the apiserver presents to
	// kubelets (exec, logs, port-forward). It is bound to the
	// system:kubelet-api-admin ClusterRole, as kubeadm does.
	APIServerKubeletClientUser = "kube-apiserver-kubelet-client"
)

// certValidity is long enough for a course, short enough not to be forever.
const certValidity = 365 * 24 * time.Hour

// PKI is the generated public key infrastructure of one control plane.
type PKI struct {
	Dir    string
	CACert *x509.Certificate
	CAKey  crypto.Signer
}

// CertFile and KeyFile return the paths of a pair inside the PKI folder.
func (p *PKI) CertFile(name string) string { return filepath.Join(p.Dir, name+".crt") }
func (p *PKI) KeyFile(name string) string  { return filepath.Join(p.Dir, name+".key") }

// CAFile is the cluster CA certificate: what clients use to verify the
// apiserver and what kubelets use to verify client certificates.
func (p *PKI) CAFile() string { return p.CertFile(CAName) }

// CAKeyFile is the cluster CA key, used by kube-controller-manager to sign
// approved CSRs.
func (p *PKI) CAKeyFile() string { return p.KeyFile(CAName) }

type certSpec struct {
	name   string
	ca     string
	cn     string
	orgs   []string
	usages []x509.ExtKeyUsage
	dns    []string
	ips    []net.IP
}

var loopbackIPs = []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}

// serviceIP is the first address of the service CIDR: the "kubernetes"
// service's ClusterIP, which in-cluster clients dial.
var serviceIP = net.ParseIP("10.0.0.1")

// leafSpecs lists every certificate; apiserverIPs are the addresses the
// apiserver serves on besides the service IP and loopback (its
// --advertise-address), which its certificate must name for clients
// there to verify it.
func leafSpecs(apiserverIPs []net.IP) []certSpec {
	server := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	client := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	return []certSpec{
		{name: apiserverName, ca: CAName, cn: "kube-apiserver", usages: server,
			dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			ips: uniqueIPs(append(append([]net.IP{serviceIP}, loopbackIPs...), apiserverIPs...))},
		{name: apiserverKubeletClientName, ca: CAName, cn: APIServerKubeletClientUser, usages: client},
		{name: adminName, ca: CAName, cn: "kubernetes-admin", orgs: []string{"system:masters"}, usages: client},
		{name: controllerManagerName, ca: CAName, cn: "system:kube-controller-manager", usages: client},
		{name: controllerManagerServerName, ca: CAName, cn: "kube-controller-manager", usages: server,
			dns: []string{"localhost"}, ips: loopbackIPs},
		// etcd serves clients and peers with one pair; peers also present it as a client.
		{name: etcdServerName, ca: EtcdCAName, cn: "etcd", usages: both, dns: []string{"localhost"}, ips: loopbackIPs},
		{name: apiserverEtcdClientName, ca: EtcdCAName, cn: "kube-apiserver-etcd-client", usages: client},
		// the aggregator's identity towards extension apiservers (the name
		// --requestheader-allowed-names admits)
		{name: frontProxyClientName, ca: FrontProxyCAName, cn: frontProxyClientName, usages: client},
	}
}

// uniqueIPs drops repeats (127.0.0.1 named as the apiserver's address),
// keeping the order.
func uniqueIPs(ips []net.IP) []net.IP {
	var out []net.IP
	seen := map[string]bool{}
	for _, ip := range ips {
		if !seen[ip.String()] {
			seen[ip.String()] = true
			out = append(out, ip)
		}
	}
	return out
}

// EnsurePKI loads the PKI in dir or generates what is missing. Reusing it
// keeps a learner's kubeconfigs and service-account tokens valid across
// restarts of lab 00. apiserverIPs are the addresses the apiserver's serving
// certificate must name besides loopback and the service IP; a certificate
// that names other addresses than these is issued again (same CA, so every
// kubeconfig stays valid).
func EnsurePKI(dir string, apiserverIPs ...net.IP) (*PKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	cas := map[string]*PKI{}
	for _, name := range []string{CAName, EtcdCAName, FrontProxyCAName} {
		cert, key, err := loadOrCreateCA(dir, name)
		if err != nil {
			return nil, err
		}
		cas[name] = &PKI{Dir: dir, CACert: cert, CAKey: key}
	}
	for _, s := range leafSpecs(apiserverIPs) {
		if err := ensureLeaf(dir, s, cas[s.ca]); err != nil {
			return nil, err
		}
	}
	if err := ensureServiceAccountKey(dir); err != nil {
		return nil, err
	}
	return cas[CAName], nil
}

func loadOrCreateCA(dir, name string) (*x509.Certificate, crypto.Signer, error) {
	if pkiutil.CertOrKeyExist(dir, name) {
		cert, key, err := pkiutil.TryLoadCertAndKeyFromDisk(dir, name)
		if err == nil && time.Now().Before(cert.NotAfter.Add(-24*time.Hour)) {
			return cert, key, nil
		}
		return nil, nil, fmt.Errorf("pki: CA %s in %s is unreadable or expiring (%v); remove the folder to regenerate it", name, dir, err)
	}
	cert, key, err := pkiutil.NewCertificateAuthority(&pkiutil.CertConfig{
		Config:              certutil.Config{CommonName: "kubelet-labs-" + name},
		NotAfter:            time.Now().Add(10 * certValidity),
		EncryptionAlgorithm: kubeadmapi.EncryptionAlgorithmECDSAP256,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("pki: create %s: %w", name, err)
	}
	if err := pkiutil.WriteCertAndKey(dir, name, cert, key); err != nil {
		return nil, nil, fmt.Errorf("pki: write %s: %w", name, err)
	}
	return cert, key, nil
}

func ensureLeaf(dir string, s certSpec, ca *PKI) error {
	if pkiutil.CertOrKeyExist(dir, s.name) {
		cert, _, err := pkiutil.TryLoadCertAndKeyFromDisk(dir, s.name)
		if err == nil && pkiutil.VerifyCertChain(cert, nil, ca.CACert) == nil && time.Now().Before(cert.NotAfter.Add(-24*time.Hour)) &&
			sameNames(cert, s) {
			return nil
		}
		// Unreadable, expiring, from another CA or for other addresses
		// (lab 00 started with another --apiserver-address): issue it again.
	}
	cert, key, err := NewSignedCertAndKey(ca.CACert, ca.CAKey, s.cn, s.orgs, s.usages, s.dns, s.ips)
	if err != nil {
		return fmt.Errorf("pki: %s: %w", s.name, err)
	}
	if err := pkiutil.WriteCertAndKey(dir, s.name, cert, key); err != nil {
		return fmt.Errorf("pki: write %s: %w", s.name, err)
	}
	return nil
}

// sameNames: the certificate names exactly the spec's DNS names and IPs.
// Exactly, not "at least": the certificate says where the apiserver serves
// now, not every network it was once opened to.
func sameNames(cert *x509.Certificate, s certSpec) bool {
	set := func(xs []string) map[string]bool {
		m := map[string]bool{}
		for _, x := range xs {
			m[x] = true
		}
		return m
	}
	ipStrings := func(ips []net.IP) []string {
		var out []string
		for _, ip := range ips {
			out = append(out, ip.String())
		}
		return out
	}
	return maps.Equal(set(cert.DNSNames), set(s.dns)) && maps.Equal(set(ipStrings(cert.IPAddresses)), set(ipStrings(s.ips)))
}

// NewSignedCertAndKey issues an ECDSA key and a certificate signed by the
// given CA. Tests and labs use it to mint, for example, a
// system:node:NAME client certificate the way the CSR signer would.
func NewSignedCertAndKey(caCert *x509.Certificate, caKey crypto.Signer, cn string, orgs []string, usages []x509.ExtKeyUsage, dns []string, ips []net.IP) (*x509.Certificate, crypto.Signer, error) {
	return pkiutil.NewCertAndKey(caCert, caKey, &pkiutil.CertConfig{
		Config: certutil.Config{
			CommonName:   cn,
			Organization: orgs,
			Usages:       usages,
			AltNames:     certutil.AltNames{DNSNames: dns, IPs: ips},
		},
		NotAfter:            time.Now().Add(certValidity),
		EncryptionAlgorithm: kubeadmapi.EncryptionAlgorithmECDSAP256,
	})
}

// ensureServiceAccountKey writes sa.key/sa.pub, the pair the apiserver signs
// service-account tokens with and the controller-manager's token controller uses.
func ensureServiceAccountKey(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, serviceAccountKeyName+".key")); err == nil {
		if _, err := os.Stat(filepath.Join(dir, serviceAccountKeyName+".pub")); err == nil {
			return nil
		}
	}
	key, err := pkiutil.GeneratePrivateKey(kubeadmapi.EncryptionAlgorithmECDSAP256)
	if err != nil {
		return fmt.Errorf("pki: service-account key: %w", err)
	}
	if err := pkiutil.WriteKey(dir, serviceAccountKeyName, key); err != nil {
		return fmt.Errorf("pki: service-account key: %w", err)
	}
	if err := pkiutil.WritePublicKey(dir, serviceAccountKeyName, key.Public()); err != nil {
		return fmt.Errorf("pki: service-account key: %w", err)
	}
	return nil
}
