// Package servingcsr approves a fake node's kubernetes.io/kubelet-serving
// CSR, as a cluster admin would with `kubectl certificate approve`: the
// controller-manager never approves serving certificates by itself,
// because the names in them (IPs, DNS) are claims someone must check. It
// checks that the requester is the node, that it asks only for its own
// name, and that every IP is an address of this machine (lab 01's node
// runs here) — but not loopback, the service range or the apiserver's own
// address, which the cluster CA must never sign into a node's certificate
// (mycore/server ServingIPPolicy says why; lab 01's node never publishes
// loopback, so nothing here is loopback by design).
package servingcsr

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/mycore/server"
)

// Approve approves nodeName's kubelet-serving CSRs with the cluster
// credentials until ctx ends, and says on out what it approved or why
// not. It watches CSRs of that signer only (a field selector, served by
// the apiserver), the way a controller would, and says when it cannot.
func Approve(ctx context.Context, cluster *rest.Config, nodeName string, out *labenv.Printer) {
	client, err := kubernetes.NewForConfig(cluster)
	if err != nil {
		out.Printf("note: cannot approve the serving CSR (%v); approve it by hand: kubectl get csr; kubectl certificate approve NAME", err)
		return
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.signerName", certificatesv1.KubeletServingSignerName).String()
	}))
	inf := factory.Certificates().V1().CertificateSigningRequests().Informer()
	var lastErr string
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *cache.Reflector, err error) {
		// A watch the server ends (EOF) or one too old to resume (410) is
		// routine: the informer lists again. Anything else is news, once.
		if ctx.Err() != nil || errors.Is(err, io.EOF) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			return
		}
		if msg := err.Error(); msg != lastErr {
			lastErr = msg
			out.Printf("note: cannot watch kubelet-serving CSRs (%v); the informer retries. Meanwhile approve by hand: kubectl get csr; kubectl certificate approve NAME", err)
		}
	})
	tried := map[string]bool{} // handlers run one at a time: no lock needed
	approve := func(obj any) {
		csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
		if !ok || csr.Spec.Username != "system:node:"+nodeName || decided(csr) || tried[csr.Name] {
			return
		}
		tried[csr.Name] = true
		policy, err := server.ClusterServingIPPolicy(ctx, client, cluster.Host, false)
		if err != nil {
			out.Printf("not approving %s: %v", csr.Name, err)
			return
		}
		local, err := localIPs()
		if err != nil {
			out.Printf("not approving %s: %v", csr.Name, err)
			return
		}
		if err := check(csr, nodeName, policy, local); err != nil {
			out.Printf("not approving %s: %v", csr.Name, err)
			return
		}
		csr = csr.DeepCopy() // the informer's copy is shared
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue,
			Reason: "KubeletLabsApprove", Message: "lab 01 approved its own node's serving certificate",
		})
		if _, err := client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
			if ctx.Err() == nil {
				out.Printf("note: could not approve serving CSR %s (%v); approve it by hand: kubectl certificate approve %s", csr.Name, err, csr.Name)
			}
			return
		}
		out.Printf("approved serving CSR %s (kubelet-serving for %s)", csr.Name, nodeName)
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    approve,
		UpdateFunc: func(_, obj any) { approve(obj) },
	})
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
}

func decided(csr *certificatesv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied {
			return true
		}
	}
	return false
}

// check is what an admin checks before approving: the CN is the node,
// every name in the request is the node's own, and no IP is one policy
// refuses.
func check(csr *certificatesv1.CertificateSigningRequest, nodeName string, policy server.ServingIPPolicy, local map[string]bool) error {
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil {
		return fmt.Errorf("no PEM request")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return err
	}
	if req.Subject.CommonName != "system:node:"+nodeName {
		return fmt.Errorf("CN %q", req.Subject.CommonName)
	}
	for _, ip := range req.IPAddresses {
		if err := policy.Refuse(ip); err != nil {
			return err
		}
		if !local[ip.String()] {
			return fmt.Errorf("asks for IP %s, which is not an address of this machine", ip)
		}
	}
	for _, name := range req.DNSNames {
		if name != nodeName {
			return fmt.Errorf("asks for DNS name %s", name)
		}
	}
	return nil
}

func localIPs() (map[string]bool, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			out[ipn.IP.String()] = true
		}
	}
	return out, nil
}
