package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"

	"kubelet-labs/mycore/bootstrap"
)

// ServingCertOptions describe the serving certificate a node asks for.
type ServingCertOptions struct {
	NodeName string
	// Client is the node's own client: the CSR's requester must be
	// system:node:NodeName, which is what makes the request believable.
	Client kubernetes.Interface
	// IPs and DNSNames go into the certificate. The apiserver dials the
	// node's InternalIP, so that address must be among IPs.
	IPs      []net.IP
	DNSNames []string
	// Dir keeps the key and certificate, as the kubelet's
	// kubelet-server-current.pem (mode 0600).
	Dir string
	// CA is the cluster CA (PEM). A stored certificate is reused only if
	// it still chains to it: a cluster made afresh has a new CA.
	CA []byte
	// Approve is called with the new CSR. Nothing in the cluster approves
	// kubelet-serving CSRs on its own (the names in them are claims
	// someone must check); AdminApprover checks and approves as an admin
	// would. nil: wait for someone to run kubectl certificate approve.
	Approve func(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error
	// Timeout for the certificate to be issued (default 2m).
	Timeout time.Duration
	// Log receives one line per step (nil: silent).
	Log func(format string, args ...any)
}

// ServingCert is the node's serving certificate.
type ServingCert struct {
	Certificate *tls.Certificate
	// Path of the PEM file with certificate and key.
	Path string
	// CSR is the request's name; empty when a stored certificate was reused.
	CSR string
}

// ServingCertificate returns the node's serving certificate: the stored
// one while it is valid for these names and this CA, else a new one
// through a kubernetes.io/kubelet-serving CSR, as the kubelet's server
// certificate manager asks for it (pkg/kubelet/certificate/kubelet.go:
// 41-71, 75-156): subject system:node:NAME in group system:nodes, the
// node's addresses as SANs, an ECDSA P-256 key.
func ServingCertificate(ctx context.Context, o ServingCertOptions) (*ServingCert, error) {
	logf := o.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if len(o.IPs) == 0 && len(o.DNSNames) == 0 {
		return nil, errors.New("serving certificate: no IP address or DNS name to put in it")
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(o.CA) {
		return nil, errors.New("serving certificate: the cluster CA holds no PEM certificate")
	}
	// The kubelet's own store: NAME-TIMESTAMP.pem files and a
	// NAME-current.pem link to the newest, written 0600.
	store, err := certificate.NewFileStoreWithLogger(logr.Discard(), "kubelet-server", o.Dir, o.Dir, "", "")
	if err != nil {
		return nil, fmt.Errorf("serving certificate store: %w", err)
	}
	if cur, err := store.Current(); err == nil {
		if why := unusable(cur, o, roots); why == "" {
			logf("serving cert  reusing %s (valid until %s)", store.CurrentPath(), cur.Leaf.NotAfter.Format(time.RFC3339))
			return &ServingCert{Certificate: cur, Path: store.CurrentPath()}, nil
		} else {
			logf("serving cert  %s cannot be reused: %s", store.CurrentPath(), why)
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
	subject := pkix.Name{CommonName: "system:node:" + o.NodeName, Organization: []string{"system:nodes"}}
	der, err := certutil.MakeCSR(key, &subject, o.DNSNames, o.IPs)
	if err != nil {
		return nil, fmt.Errorf("make CSR: %w", err)
	}
	// client-go's csr package logs through the context's logger; we say
	// what happens ourselves.
	quiet := klog.NewContext(ctx, logr.Discard())
	name, uid, err := csr.RequestCertificateWithContext(quiet, o.Client, der, "", certificatesv1.KubeletServingSignerName,
		nil, certificate.DefaultKubeletServingGetUsages(key), key)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	logf("serving cert  CSR %s posted as system:node:%s (signer %s, SANs %s)", name, o.NodeName, certificatesv1.KubeletServingSignerName, sans(o.IPs, o.DNSNames))
	if o.Approve != nil {
		obj, err := o.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("serving certificate: read CSR %s back: %w", name, err)
		}
		if err := o.Approve(ctx, obj); err != nil {
			return nil, fmt.Errorf("serving certificate: approve CSR %s: %w", name, err)
		}
	} else {
		logf("serving cert  waiting for someone to approve it: kubectl certificate approve %s", name)
	}
	wctx, cancel := context.WithTimeout(quiet, o.Timeout)
	defer cancel()
	certPEM, err := csr.WaitForCertificate(wctx, o.Client, name, uid)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("serving certificate: CSR %s not issued within %s (approved? kubectl get csr %s): %w", name, o.Timeout, name, err)
	}
	cert, err := store.Update(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: store: %w", err)
	}
	if why := unusable(cert, o, roots); why != "" {
		return nil, fmt.Errorf("serving certificate from CSR %s is unusable: %s", name, why)
	}
	logf("serving cert  issued by %q, valid until %s, stored in %s", cert.Leaf.Issuer.CommonName, cert.Leaf.NotAfter.Format(time.RFC3339), store.CurrentPath())
	return &ServingCert{Certificate: cert, Path: store.CurrentPath(), CSR: name}, nil
}

// unusable says why a stored certificate cannot serve ("" if it can): not
// from this CA, not for these names, or past 80% of its life — the kubelet
// rotates between 70% and 90% (certificate_manager.go nextRotationDeadline).
func unusable(c *tls.Certificate, o ServingCertOptions, roots *x509.CertPool) string {
	leaf := c.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return err.Error()
		}
		c.Leaf = leaf
	}
	if leaf.Subject.CommonName != "system:node:"+o.NodeName {
		return "it is for " + leaf.Subject.CommonName
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return "it does not verify against the cluster CA: " + err.Error()
	}
	want, have := sans(o.IPs, o.DNSNames), sans(leaf.IPAddresses, leaf.DNSNames)
	if want != have {
		return fmt.Sprintf("it is for %s, the node now needs %s", have, want)
	}
	life := leaf.NotAfter.Sub(leaf.NotBefore)
	if time.Now().After(leaf.NotBefore.Add(life * 8 / 10)) {
		return "it is past 80% of its lifetime"
	}
	return ""
}

func sans(ips []net.IP, dns []string) string {
	var s []string
	for _, ip := range ips {
		s = append(s, "IP:"+ip.String())
	}
	for _, d := range dns {
		s = append(s, "DNS:"+d)
	}
	slices.Sort(s)
	return strings.Join(s, ",")
}

// ApproverOptions say what AdminApprover needs beyond the admin client.
type ApproverOptions struct {
	// APIServer is the URL clients dial the apiserver at (rest.Config.Host):
	// its IP is never signed into a node's certificate.
	APIServer string
	// LoopbackByDesign: the cluster runs on this machine's loopback on
	// purpose (the labs), so 127.0.0.1 may be signed when the apiserver is
	// dialled there too (ServingIPPolicy.AllowLoopback says why that is
	// sound there and nowhere else).
	LoopbackByDesign bool
}

// AdminApprover approves a node's kubelet-serving CSR with admin
// credentials, after the checks an admin (or an approver controller such
// as kubelet-csr-approver) makes: the request comes from the node it
// names, asks for the kubelet-serving usages only, every IP and DNS name
// in it is one of that Node's addresses in its status — and, since the
// node wrote those addresses itself, no IP is the apiserver's, in the
// service range, or loopback unless by design (ServingIPPolicy). The
// approval itself is `kubectl certificate approve` (bootstrap.SetApproval).
func AdminApprover(admin kubernetes.Interface, o ApproverOptions) func(context.Context, *certificatesv1.CertificateSigningRequest) error {
	return func(ctx context.Context, c *certificatesv1.CertificateSigningRequest) error {
		policy, err := ClusterServingIPPolicy(ctx, admin, o.APIServer, o.LoopbackByDesign)
		if err != nil {
			return fmt.Errorf("not approving %s: %w", c.Name, err)
		}
		if err := checkServingCSR(ctx, admin, c, policy); err != nil {
			return fmt.Errorf("not approving %s: %w", c.Name, err)
		}
		return bootstrap.SetApproval(ctx, admin, c.Name, true, "KubeletLabsApprove",
			"approved with admin credentials: requester, usages and SANs match the Node, no IP of the apiserver or the service range")
	}
}

func checkServingCSR(ctx context.Context, admin kubernetes.Interface, c *certificatesv1.CertificateSigningRequest, policy ServingIPPolicy) error {
	if c.Spec.SignerName != certificatesv1.KubeletServingSignerName {
		return fmt.Errorf("signer %s, not %s", c.Spec.SignerName, certificatesv1.KubeletServingSignerName)
	}
	block, _ := pem.Decode(c.Spec.Request)
	if block == nil {
		return errors.New("no PEM certificate request")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return err
	}
	nodeName, ok := strings.CutPrefix(req.Subject.CommonName, "system:node:")
	if !ok || c.Spec.Username != req.Subject.CommonName {
		return fmt.Errorf("CN %q requested by %q: a node asks for its own name only", req.Subject.CommonName, c.Spec.Username)
	}
	for _, u := range c.Spec.Usages {
		switch u {
		case certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth:
		default:
			return fmt.Errorf("usage %q is not a serving usage", u)
		}
	}
	node, err := admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read Node %s to check the addresses: %w", nodeName, err)
	}
	addrs := map[string]bool{}
	for _, a := range node.Status.Addresses {
		switch a.Type {
		case v1.NodeInternalIP, v1.NodeExternalIP, v1.NodeHostName, v1.NodeInternalDNS, v1.NodeExternalDNS:
			addrs[a.Address] = true
		}
	}
	for _, ip := range req.IPAddresses {
		if !addrs[ip.String()] {
			return fmt.Errorf("IP %s is not an address of Node %s", ip, nodeName)
		}
		if err := policy.Refuse(ip); err != nil {
			return err
		}
	}
	for _, d := range req.DNSNames {
		if !addrs[d] {
			return fmt.Errorf("DNS name %s is not an address of Node %s", d, nodeName)
		}
	}
	return nil
}
