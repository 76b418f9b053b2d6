package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"kubelet-labs/mylib/fakenode"
)

// watcher prints what a learner should notice, and nothing else.
type watcher struct {
	nodeName string
	start    time.Time

	mu     sync.Mutex
	phases map[string]corev1.PodPhase
}

func (w *watcher) since() string { return time.Since(w.start).Round(10 * time.Millisecond).String() }

// waitReady follows the kubelet's start: the client certificate appears
// (TLS bootstrap done), then the Node, then its Ready condition.
func (w *watcher) waitReady(ctx context.Context, cfg fakenode.Config, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	certFile := filepath.Join(cfg.CertDir(), "kubelet-client-current.pem")
	// The kubelet writes its kubeconfig first and the certificate it points
	// at when the CSR is issued: wait for both.
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		_, errConfig := os.Stat(cfg.Kubeconfig())
		_, errCert := os.Stat(certFile)
		return errConfig == nil && errCert == nil, nil
	})
	if err != nil {
		return fmt.Errorf("node %s got no client certificate within %s: is the CSR approved? (kubectl get csr; the bootstrap credentials must be allowed to request node client certificates)", w.nodeName, timeout)
	}
	if subj, err := certSubject(certFile); err == nil {
		fmt.Printf("[%s] TLS bootstrap done: client certificate %s\n", w.since(), subj)
	}
	client, err := nodeClient(cfg)
	if err != nil {
		return err
	}
	registered := false
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		node, err := client.CoreV1().Nodes().Get(ctx, w.nodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, nil // transient; the kubelet retries too
		}
		if !registered {
			registered = true
			fmt.Printf("[%s] Node %s registered\n", w.since(), w.nodeName)
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				fmt.Printf("[%s] Node %s is Ready (%s)\n", w.since(), w.nodeName, c.Message)
				fmt.Printf("[%s] the apiserver reaches its kubelet at https://%s (InternalIP) for logs and exec\n", w.since(), reachableAt(node))
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("node %s not Ready within %s", w.nodeName, timeout)
	}
	return nil
}

func certSubject(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return "", fmt.Errorf("no certificate in %s", path)
		}
		if block.Type == "CERTIFICATE" {
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("CN=%s O=%s, issued by %s, valid until %s", cert.Subject.CommonName,
				strings.Join(cert.Subject.Organization, ","), cert.Issuer.CommonName, cert.NotAfter.Format("2006-01-02")), nil
		}
	}
}

// watchPods prints each pod's phase changes on this node, the way the
// kubelet itself sees pods: a watch filtered by spec.nodeName.
func (w *watcher) watchPods(ctx context.Context, client kubernetes.Interface) {
	w.phases = map[string]corev1.PodPhase{}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", w.nodeName).String()
	}))
	inf := factory.Core().V1().Pods().Informer()
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.podChanged(obj.(*corev1.Pod)) },
		UpdateFunc: func(_, obj any) { w.podChanged(obj.(*corev1.Pod)) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				fmt.Printf("[%s] pod %s/%s deleted\n", w.since(), p.Namespace, p.Name)
			}
		},
	})
	factory.Start(ctx.Done())
}

func (w *watcher) podChanged(p *corev1.Pod) {
	key := p.Namespace + "/" + p.Name
	phase := p.Status.Phase
	if p.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	w.mu.Lock()
	old, seen := w.phases[key]
	w.phases[key] = phase
	w.mu.Unlock()
	if seen && old == phase {
		return
	}
	age := time.Since(p.CreationTimestamp.Time).Round(10 * time.Millisecond)
	if !seen {
		fmt.Printf("[%s] pod %s: %s (created %s ago)\n", w.since(), key, phase, age)
		return
	}
	fmt.Printf("[%s] pod %s: %s -> %s (%s after creation)\n", w.since(), key, old, phase, age)
}

// approveServingCSRs approves this node's kubernetes.io/kubelet-serving
// CSRs, as a cluster admin would with `kubectl certificate approve`: the
// controller-manager never auto-approves serving certificates, because the
// names in them (IPs, DNS) are claims someone must check. We check that
// the requester is this node and that it asks only for its own name and
// addresses of this machine.
//
// It watches CSRs of that signer only (a field selector, served by the
// apiserver), the way a controller would, and says when it cannot.
func approveServingCSRs(ctx context.Context, cluster *rest.Config, nodeName string) {
	client, err := kubernetes.NewForConfig(cluster)
	if err != nil {
		fmt.Printf("note: cannot approve the serving CSR (%v); approve it by hand: kubectl get csr; kubectl certificate approve NAME\n", err)
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
			fmt.Printf("note: cannot watch kubelet-serving CSRs (%v); the informer retries. Meanwhile approve by hand: kubectl get csr; kubectl certificate approve NAME\n", err)
		}
	})
	tried := map[string]bool{} // handlers run one at a time: no lock needed
	approve := func(obj any) {
		csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
		if !ok || csr.Spec.Username != "system:node:"+nodeName || decided(csr) || tried[csr.Name] {
			return
		}
		tried[csr.Name] = true
		if err := checkServingRequest(csr, nodeName); err != nil {
			fmt.Printf("not approving %s: %v\n", csr.Name, err)
			return
		}
		csr = csr.DeepCopy() // the informer's copy is shared
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue,
			Reason: "KubeletLabsApprove", Message: "lab 01 approved its own node's serving certificate",
		})
		if _, err := client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
			if ctx.Err() == nil {
				fmt.Printf("note: could not approve serving CSR %s (%v); approve it by hand: kubectl certificate approve %s\n", csr.Name, err, csr.Name)
			}
			return
		}
		fmt.Printf("approved serving CSR %s (kubelet-serving for %s)\n", csr.Name, nodeName)
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    approve,
		UpdateFunc: func(_, obj any) { approve(obj) },
	})
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
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

func decided(csr *certificatesv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied {
			return true
		}
	}
	return false
}

func checkServingRequest(csr *certificatesv1.CertificateSigningRequest, nodeName string) error {
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
	local, err := localIPs()
	if err != nil {
		return err
	}
	for _, ip := range req.IPAddresses {
		if !ip.IsLoopback() && !local[ip.String()] {
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
