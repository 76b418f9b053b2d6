// Package nodewatch runs no node: it watches lab 01's fake node (the real
// kubelet, mylib/fakenode) from outside and prints what a learner should
// notice while it starts and runs, and nothing else: the TLS bootstrap done (the
// client certificate appears), the Node registered, the Node Ready and
// where the apiserver reaches its kubelet, then each phase change of the
// pods bound to it. It looks from outside, as kubectl would: files in the
// node's folder and the API, read with the node's own credentials.
package nodewatch

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/mylib/fakenode"
)

// Watcher follows one node. Its lines start with the time since Start, so
// a learner reads how long each step took.
type Watcher struct {
	nodeName string
	start    time.Time
	out      *labenv.Printer

	mu     sync.Mutex
	phases map[string]corev1.PodPhase
}

// New returns a watcher for nodeName that prints to out; start is when the
// node was started.
func New(out *labenv.Printer, nodeName string, start time.Time) *Watcher {
	return &Watcher{nodeName: nodeName, start: start, out: out, phases: map[string]corev1.PodPhase{}}
}

func (w *Watcher) since() string { return time.Since(w.start).Round(10 * time.Millisecond).String() }

// WaitReady follows the kubelet's start: the client certificate appears
// (TLS bootstrap done), then the Node, then its Ready condition. It
// returns when the Node is Ready, when ctx ends, or after timeout.
func (w *Watcher) WaitReady(ctx context.Context, cfg fakenode.Config, timeout time.Duration) error {
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
		w.out.Printf("[%s] TLS bootstrap done: client certificate %s", w.since(), subj)
	}
	client, err := NodeClient(cfg)
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
			w.out.Printf("[%s] Node %s registered", w.since(), w.nodeName)
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				w.out.Printf("[%s] Node %s is Ready (%s)", w.since(), w.nodeName, c.Message)
				w.out.Printf("[%s] the apiserver reaches its kubelet at https://%s (InternalIP) for logs and exec", w.since(), ReachableAt(node))
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

// WatchPods prints each phase change of the pods bound to the node, the
// way the kubelet itself sees pods: a watch filtered by spec.nodeName. It
// returns when ctx ends, with the informer stopped.
func (w *Watcher) WatchPods(ctx context.Context, cfg fakenode.Config) error {
	client, err := NodeClient(cfg)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", w.nodeName).String()
	}))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.podChanged(obj.(*corev1.Pod)) },
		UpdateFunc: func(_, obj any) { w.podChanged(obj.(*corev1.Pod)) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				w.out.Printf("[%s] pod %s/%s deleted", w.since(), p.Namespace, p.Name)
			}
		},
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
	return nil
}

func (w *Watcher) podChanged(p *corev1.Pod) {
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
		w.out.Printf("[%s] pod %s: %s (created %s ago)", w.since(), key, phase, age)
		return
	}
	w.out.Printf("[%s] pod %s: %s -> %s (%s after creation)", w.since(), key, old, phase, age)
}

// NodeClient uses the node's own credentials, written by the TLS
// bootstrap: what the lab reads is what the node may read.
func NodeClient(cfg fakenode.Config) (kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig())
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(rc)
}

// ReachableAt is where the apiserver connects for logs and exec: the
// node's InternalIP (--kubelet-preferred-address-types) and its port.
func ReachableAt(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return net.JoinHostPort(a.Address, fmt.Sprint(n.Status.DaemonEndpoints.KubeletEndpoint.Port))
		}
	}
	return "(no InternalIP)"
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
