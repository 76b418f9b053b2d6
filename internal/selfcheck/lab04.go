package main

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"

	"kubelet-labs/internal/labnames"
	"kubelet-labs/mycore/bootstrap"
)

func init() {
	register("04", labCheck{Title: "a node certificate through the CSR API", Check: checkLab04})
}

// The README's steps, as hints.
const (
	lab04ByHand   = "run the README's first block (By hand, with openssl and kubectl)"
	lab04Serving  = "run the README's block with step 6 (Two signers for a node); its last command fails on purpose"
	lab04Auto     = "run go run ./labs/04-csr (README, The same in code)"
	lab04Admin    = "run go run ./labs/04-csr --approve=admin (README, The same in code)"
	lab04Manual   = "run go run ./labs/04-csr --approve=manual --timeout=5s (README, The same in code); nobody approves, on purpose"
	lab04Lifetime = "run go run ./labs/04-csr --expiration-seconds=3600 and --node-name=lab-node-04b --expiration-seconds=63072000 (README, How long the certificate lives)"
	// The csrcleaner deletes an issued CSR approved more than an hour ago, at
	// its hourly sweep
	// (pkg/controller/certificates/cleaner/cleaner.go, isIssuedPastDeadline).
	csrGone     = "the csrcleaner deletes issued CSRs approved more than an hour ago"
	csrGoneHint = "; an issued CSR lasts an hour or so after its approval (the csrcleaner deletes it): later, run it again"
)

func checkLab04(ctx context.Context, e *Env) []Result {
	kube, caPEM, err := e.ClusterCA(ctx)
	if err != nil {
		return NoCluster(err)
	}
	csrs, err := kube.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		return NoCluster(err)
	}
	byHand := e.StatePath("04-csr", "by-hand")
	node := e.StatePath("nodes", labnames.Node04)
	return []Result{
		lab04HandClient(ctx, kube, byHand, caPEM),
		lab04Lifetimes(csrs.Items),
		lab04HandServing(ctx, kube, byHand),
		lab04ApprovedBy(csrs.Items, "AutoApproved", "auto-approved by the controller-manager's csrapproving controller", lab04Auto),
		lab04ApprovedBy(csrs.Items, "KubeletLabsApprove", "approved by the lab with the admin client", lab04Admin),
		nodeCredentials(ctx, kube, node, labnames.Node04, e.Server(), caPEM, lab04Auto),
		lab04Pending(ctx, kube, node),
	}
}

// lab04HandClient: the client certificate made by hand, and its CSR while
// it exists.
func lab04HandClient(ctx context.Context, kube kubernetes.Interface, dir string, caPEM []byte) Result {
	cert, err := readCert(filepath.Join(dir, "hand-node.crt"))
	if err != nil {
		return NotYet("by hand: no certificate 04-csr/by-hand/hand-node.crt in the state folder", lab04ByHand)
	}
	if cert.Subject.CommonName != "system:node:hand-node" {
		return NotYet("by hand: hand-node.crt is for "+cert.Subject.CommonName+", not system:node:hand-node", lab04ByHand)
	}
	if err := bootstrap.VerifyClientCert(cert, caPEM); err != nil {
		return NotYet("by hand: hand-node.crt is not a valid client certificate of this cluster's CA: "+err.Error(), lab04ByHand)
	}
	who, err := whoAmIWith(ctx, filepath.Join(dir, "hand-node.kubeconfig"))
	if err != nil {
		return NotYet("by hand: hand-node.kubeconfig does not log in: "+err.Error(), lab04ByHand+" to its end (step 5)")
	}
	csr := "its CSR is gone (" + csrGone + ")"
	if c, err := kube.CertificatesV1().CertificateSigningRequests().Get(ctx, "hand-node", metav1.GetOptions{}); err == nil {
		if c.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName || !strings.HasPrefix(c.Spec.Username, "system:bootstrap:") {
			return NotYet(fmt.Sprintf("by hand: CSR hand-node has signer %s and was posted by %s: want %s, posted with the bootstrap token", c.Spec.SignerName, c.Spec.Username, certificatesv1.KubeAPIServerClientKubeletSignerName), "kubectl delete csr hand-node hand-node-serving, then "+lab04ByHand)
		}
		csr = "CSR hand-node " + csrCondition(c) + ", posted with a bootstrap token"
	}
	return Done("by hand: hand-node.crt from the cluster CA, hand-node.kubeconfig logs in as %s; %s", who, csr)
}

// lab04Lifetimes: what --expiration-seconds asked for and what the signer
// gave, read from the issued CSRs of lab-node-04 and lab-node-04b.
func lab04Lifetimes(csrs []certificatesv1.CertificateSigningRequest) Result {
	var seen, missing []string
	for _, want := range []struct {
		node    string
		seconds int32
	}{{labnames.Node04, 3600}, {"lab-node-04b", 63072000}} {
		found := false
		for i := range csrs {
			c := &csrs[i]
			if csrCommonName(c) != "system:node:"+want.node || c.Spec.ExpirationSeconds == nil || *c.Spec.ExpirationSeconds != want.seconds {
				continue
			}
			cert, err := issuedCert(c)
			if err != nil {
				continue
			}
			// notBefore is back-dated 5 minutes for clock skew; the lab
			// says "from now" at issue, i.e. from notBefore + 5m.
			got := cert.NotAfter.Sub(cert.NotBefore.Add(5 * time.Minute))
			seen = append(seen, fmt.Sprintf("%s asked %s, got %s", want.node, bootstrap.HumanDuration(time.Duration(want.seconds)*time.Second), bootstrap.HumanDuration(got)))
			found = true
			break
		}
		if !found {
			missing = append(missing, fmt.Sprintf("%s with --expiration-seconds=%d", want.node, want.seconds))
		}
	}
	if len(missing) > 0 {
		return NotYet("lifetimes: no issued CSR for "+strings.Join(missing, " nor "), lab04Lifetime+csrGoneHint)
	}
	return Done("lifetimes: %s", strings.Join(seen, "; "))
}

// lab04HandServing: the serving certificate made by hand, posted by the
// node itself.
func lab04HandServing(ctx context.Context, kube kubernetes.Interface, dir string) Result {
	cert, err := readCert(filepath.Join(dir, "hand-node-serving.crt"))
	if err != nil {
		return NotYet("serving: no certificate 04-csr/by-hand/hand-node-serving.crt in the state folder", lab04Serving)
	}
	if !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageServerAuth) || !slices.Contains(cert.DNSNames, "hand-node") {
		return NotYet(fmt.Sprintf("serving: hand-node-serving.crt is not a serving certificate for hand-node (usages %v, names %v)", cert.ExtKeyUsage, cert.DNSNames), lab04Serving)
	}
	csr := "its CSR is gone (" + csrGone + ")"
	if c, err := kube.CertificatesV1().CertificateSigningRequests().Get(ctx, "hand-node-serving", metav1.GetOptions{}); err == nil {
		if c.Spec.SignerName != certificatesv1.KubeletServingSignerName || c.Spec.Username != "system:node:hand-node" {
			return NotYet(fmt.Sprintf("serving: CSR hand-node-serving has signer %s and was posted by %s: want %s, posted by system:node:hand-node", c.Spec.SignerName, c.Spec.Username, certificatesv1.KubeletServingSignerName), "kubectl delete csr hand-node-serving, then "+lab04Serving)
		}
		csr = "CSR hand-node-serving " + csrCondition(c) + ", signer " + c.Spec.SignerName + ", posted by " + c.Spec.Username
	}
	return Done("serving: hand-node-serving.crt for DNS:hand-node (server auth); %s", csr)
}

// lab04ApprovedBy: an issued client CSR of lab-node-04 whose Approved
// condition has this reason.
func lab04ApprovedBy(csrs []certificatesv1.CertificateSigningRequest, reason, who, hint string) Result {
	for i := range csrs {
		c := &csrs[i]
		if csrCommonName(c) != "system:node:lab-node-04" || c.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName || len(c.Status.Certificate) == 0 {
			continue
		}
		for _, cond := range c.Status.Conditions {
			if cond.Type == certificatesv1.CertificateApproved && cond.Reason == reason {
				return Done("lab-node-04: a CSR %s (%s) and issued", who, reason)
			}
		}
	}
	return NotYet(fmt.Sprintf("lab-node-04: no issued CSR %s (%s)", who, reason), hint+csrGoneHint)
}

// nodeCredentials: the node folder holds a client certificate for
// system:node:NAME from the cluster CA, its kubeconfig logs in as that,
// and (while it exists) the CSR named after its key was approved.
func nodeCredentials(ctx context.Context, kube kubernetes.Interface, dir, name, server string, caPEM []byte, hint string) Result {
	creds := bootstrap.CredentialsIn(dir)
	shown := "nodes/" + name
	cert, err := creds.Check(name, server, caPEM)
	if err == bootstrap.ErrNoCredentials { // not wrapped: no kubeconfig at all

		return NotYet(shown+": no kubelet.kubeconfig in the state folder", hint)
	}
	if err != nil {
		return NotYet(shown+": credentials not usable: "+err.Error(), hint)
	}
	who, err := whoAmIWith(ctx, creds.Kubeconfig)
	if err != nil {
		return NotYet(shown+"/kubelet.kubeconfig does not log in: "+err.Error(), hint)
	}
	csr := "its CSR is gone (" + csrGone + ")"
	if csrName, err := csrNameOf(cert.PublicKey, name); err == nil {
		if c, err := kube.CertificatesV1().CertificateSigningRequests().Get(ctx, csrName, metav1.GetOptions{}); err == nil {
			csr = "its CSR (named after its key) " + csrCondition(c)
		}
	}
	return Done("%s: kubelet-client.crt from the cluster CA, valid until %s; kubelet.kubeconfig logs in as %s; %s",
		shown, cert.NotAfter.Format("2006-01-02"), who, csr)
}

// lab04Pending: the manual run that nobody approved left its key and a
// Pending CSR named after it — what the next run finds.
func lab04Pending(ctx context.Context, kube kubernetes.Interface, dir string) Result {
	keyPEM, err := os.ReadFile(filepath.Join(dir, "kubelet-client.key.tmp"))
	if errors.Is(err, os.ErrNotExist) {
		return NotYet("lab-node-04: no pending key kubelet-client.key.tmp (a run that waits for an approval keeps it)", lab04Manual)
	}
	if err != nil {
		return NotYet("lab-node-04: "+err.Error(), lab04Manual)
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return NotYet("lab-node-04: kubelet-client.key.tmp: "+err.Error(), "delete it and "+lab04Manual)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return NotYet(fmt.Sprintf("lab-node-04: kubelet-client.key.tmp holds a %T", key), "delete it and "+lab04Manual)
	}
	name, err := csrNameOf(signer.Public(), labnames.Node04)
	if err != nil {
		return NotYet("lab-node-04: "+err.Error(), lab04Manual)
	}
	c, err := kube.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return NotYet("lab-node-04: kubelet-client.key.tmp is kept, but no CSR of that key exists any more", lab04Manual)
	}
	if err != nil {
		return NotYet("lab-node-04: "+err.Error(), lab04Manual)
	}
	return Done("lab-node-04: kubelet-client.key.tmp kept for CSR %s, %s: the next run with this key finds it", name, csrCondition(c))
}

// csrCommonName is the subject CN of a CSR's request ("" if unreadable).
func csrCommonName(c *certificatesv1.CertificateSigningRequest) string {
	block, _ := pem.Decode(c.Spec.Request)
	if block == nil {
		return ""
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return ""
	}
	return req.Subject.CommonName
}

// csrCondition is what kubectl get csr shows in CONDITION:
// Approved,Issued / Pending / Denied.
func csrCondition(c *certificatesv1.CertificateSigningRequest) string {
	var parts []string
	for _, cond := range c.Status.Conditions {
		if cond.Status == corev1.ConditionTrue {
			parts = append(parts, string(cond.Type))
		}
	}
	if len(c.Status.Certificate) > 0 {
		parts = append(parts, "Issued")
	}
	if len(parts) == 0 {
		return "Pending"
	}
	return strings.Join(parts, ",")
}

// issuedCert parses the certificate a CSR was issued.
func issuedCert(c *certificatesv1.CertificateSigningRequest) (*x509.Certificate, error) {
	certs, err := certutil.ParseCertsPEM(c.Status.Certificate)
	if err != nil {
		return nil, err
	}
	return certs[0], nil
}

// csrNameOf is the name the kubelet (and the labs) give the client CSR
// of this public key for node name: a hash of key, subject and usages.
func csrNameOf(pub any, node string) (string, error) {
	// The usages depend on the key type only (NodeClientUsages): key
	// encipherment for RSA keys alone.
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	if _, ok := pub.(*rsa.PublicKey); ok {
		usages = append(usages, certificatesv1.UsageKeyEncipherment)
	}
	return bootstrap.NodeCSRName(pub, bootstrap.NodeSubject(node), usages)
}

// readCert reads the first certificate of a PEM file.
func readCert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	certs, err := certutil.ParseCertsPEM(b)
	if err != nil {
		return nil, err
	}
	return certs[0], nil
}

// whoAmIWith asks who a kubeconfig logs in as: "user [groups]".
func whoAmIWith(ctx context.Context, kubeconfig string) (string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return "", err
	}
	cfg.Timeout = 10 * time.Second
	who, err := bootstrap.WhoAmI(ctx, cfg)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %v", who.Username, who.Groups), nil
}
