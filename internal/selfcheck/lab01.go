package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"

	"kubelet-labs/internal/labnames"
)

// Lab 01 runs fake nodes (the real kubelet): the checks look at the Nodes
// and Leases they made, the certificates their TLS bootstrap left in the
// state folder's nodes/NAME/pki, the CSRs, and the kubelet's log of the pod
// the README runs. The Lease shows whether a node runs now.
func init() {
	register("01", labCheck{Title: "a fake node: the real kubelet on a mock runtime", Check: checkLab01})
}

func checkLab01(ctx context.Context, e *Env) []Result {
	kube, err := e.Kube(ctx)
	if err != nil {
		return NoCluster(err)
	}
	return []Result{
		lab01Registered(ctx, kube, labnames.Node01),
		lab01Bootstrap(ctx, e, labnames.Node01),
		lab01Lease(ctx, kube, labnames.Node01),
		lab01Pod(ctx, e, kube),
		lab01TokenJoin(ctx, kube),
		lab01Loopback(ctx, kube),
	}
}

// lab01Registered: the kubelet registered its Node and reported Ready.
func lab01Registered(ctx context.Context, kube kubernetes.Interface, name string) Result {
	n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return NotYet("Node "+name+": "+err.Error(), "start the node: ./boot.sh (README, Run it), with lab 00 running")
	}
	info := n.Status.NodeInfo
	if info.KubeletVersion == "" {
		return NotYet("Node "+name+" has no status from a kubelet", "start it (./boot.sh) and read its kubelet log, nodes/"+name+"/kubelet.log")
	}
	ready := "no Ready condition"
	if c := readyCondition(n); c != nil {
		ready = fmt.Sprintf("Ready=%s now (%s)", c.Status, c.Message)
	}
	return Done("Node %s registered by kubelet %s on %s; %s", n.Name, info.KubeletVersion, info.ContainerRuntimeVersion, ready)
}

// lab01Bootstrap: the client certificate the TLS bootstrap got, signed by
// the cluster CA, and the serving certificate the lab approved.
func lab01Bootstrap(ctx context.Context, e *Env, name string) Result {
	hint := "start the node (./boot.sh): its kubelet asks for both certificates"
	pki := e.StatePath("nodes", name, "pki")
	client, err := lab01Cert(filepath.Join(pki, "kubelet-client-current.pem"))
	if err != nil {
		return NotYet("no client certificate from the TLS bootstrap: "+err.Error(), hint)
	}
	want := "system:node:" + name
	if client.Subject.CommonName != want || !slices.Contains(client.Subject.Organization, "system:nodes") {
		return NotYet(fmt.Sprintf("the client certificate is CN=%s O=%v, not %s in system:nodes", client.Subject.CommonName, client.Subject.Organization, want), hint)
	}
	// the CA the cluster's nodes trust (kube-public/cluster-info, as a
	// joining node finds it): lab 00's pki/ca.crt there, kubeadm's on kind
	_, caPEM, err := e.ClusterCA(ctx)
	if err != nil {
		return NotYet("the cluster CA: "+err.Error(), "start lab 00: go run ./labs/00-cluster")
	}
	cas, err := certutil.ParseCertsPEM(caPEM)
	if err != nil || len(cas) == 0 {
		return NotYet(fmt.Sprintf("the cluster CA: no certificate (%v)", err), "start lab 00: go run ./labs/00-cluster")
	}
	if err := client.CheckSignatureFrom(cas[0]); err != nil {
		return NotYet("the client certificate is not signed by the cluster CA ("+err.Error()+")", "remove nodes/"+name+" and start the node again: ./boot.sh")
	}
	if _, err := lab01Cert(filepath.Join(pki, "kubelet-server-current.pem")); err != nil {
		return NotYet("no serving certificate (the kubelet-serving CSR the lab approves): "+err.Error(), hint)
	}
	return Done("TLS bootstrap: client certificate CN=%s O=system:nodes signed by the cluster CA, and a serving certificate, in nodes/%s/pki", want, name)
}

// lab01Cert reads the first certificate of a PEM file (the kubelet's
// *-current.pem hold the certificate and its key).
func lab01Cert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for {
		var block *pem.Block
		if block, b = pem.Decode(b); block == nil {
			return nil, fmt.Errorf("%s: no certificate", path)
		}
		if block.Type == "CERTIFICATE" {
			return x509.ParseCertificate(block.Bytes)
		}
	}
}

// lab01Lease: the heartbeat, renewed every quarter of its duration while
// the node runs.
func lab01Lease(ctx context.Context, kube kubernetes.Interface, name string) Result {
	l, err := kube.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return NotYet("Lease kube-node-lease/"+name+": "+err.Error(), "start the node: ./boot.sh")
	}
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return NotYet("Lease kube-node-lease/"+name+" was never renewed", "start the node: ./boot.sh")
	}
	dur := time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	age := time.Since(l.Spec.RenewTime.Time)
	if age > dur {
		return NotYet(fmt.Sprintf("Lease kube-node-lease/%s last renewed %s ago: %s is not running now", name, age.Round(time.Second), name),
			"start it again (./boot.sh) and watch spec.renewTime move: kubectl -n kube-node-lease get lease "+name+" -o yaml")
	}
	return Done("Lease kube-node-lease/%s renewed %s ago (every %s: a quarter of %s)", name, age.Round(time.Second), dur/4, dur)
}

// lab01Pod: yaml/nginx.yaml ran on fake-node-1. While it exists it is in
// the API; after kubectl delete, the node's kubelet log still has the
// line its pod startup latency tracker writes when the pod runs
// (pkg/kubelet/util/pod_startup_latency_tracker.go in v1.36.3). Its
// pod-logs/ folder would not do: the kubelet's garbage collector removes a
// deleted pod's logs within a minute.
func lab01Pod(ctx context.Context, e *Env, kube kubernetes.Interface) Result {
	hint := "run a pod on it: kubectl apply -f yaml/nginx.yaml; kubectl logs nginx; kubectl exec nginx -- echo hi"
	if p, err := kube.CoreV1().Pods("default").Get(ctx, "nginx", metav1.GetOptions{}); err == nil && p.Spec.NodeName == labnames.Node01 {
		return Done("pod default/nginx on fake-node-1: %s", p.Status.Phase)
	}
	log, err := os.ReadFile(e.StatePath("nodes", labnames.Node01, "kubelet.log"))
	if err != nil {
		return NotYet("no pod nginx on fake-node-1, and no kubelet log: "+err.Error(), hint)
	}
	m := lab01PodStarted.FindSubmatch(log)
	if m == nil {
		return NotYet("no pod nginx has run on fake-node-1 (none in the API, none in nodes/fake-node-1/kubelet.log)", hint)
	}
	took, err := time.ParseDuration(string(m[1]))
	if err != nil {
		return Done("pod default/nginx ran on fake-node-1 (nodes/fake-node-1/kubelet.log)")
	}
	return Done("pod default/nginx ran on fake-node-1: its kubelet log says it was running %s after its creation", took.Round(10*time.Millisecond))
}

// lab01PodStarted is the kubelet's line for a pod that reached Running.
var lab01PodStarted = regexp.MustCompile(`"Observed pod startup duration" pod="default/nginx" .*podStartE2EDuration="([^"]+)"`)

// lab01TokenJoin: fake-node-2 joined with lab 03's bootstrap token — its
// client CSR's requestor is system:bootstrap:TOKEN-ID.
func lab01TokenJoin(ctx context.Context, kube kubernetes.Interface) Result {
	hint := `make a token (go run ./labs/03-bootstrap-token), then: ./boot.sh --node-name=fake-node-2 --bootstrap-kubeconfig="${LABS_STATE_DIR:-.labs}/bootstrap/bootstrap-kubelet.kubeconfig"`
	if _, err := kube.CoreV1().Nodes().Get(ctx, "fake-node-2", metav1.GetOptions{}); err != nil {
		return NotYet("Node fake-node-2: "+err.Error(), hint)
	}
	csrs, err := kube.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		return NotYet("CSRs: "+err.Error(), hint)
	}
	requestor := ""
	for _, csr := range csrs.Items {
		if csr.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName && lab01CSRSubject(csr.Spec.Request) == "system:node:fake-node-2" {
			requestor = csr.Spec.Username
		}
	}
	switch {
	case strings.HasPrefix(requestor, "system:bootstrap:"):
		return Done("Node fake-node-2 joined with a bootstrap token: its client CSR was requested by %s", requestor)
	case requestor != "":
		return NotYet("fake-node-2's client CSR was requested by "+requestor+", not a bootstrap token", "stop fake-node-2, remove the state folder's nodes/fake-node-2, and start it with the token: "+hint)
	}
	// The controller-manager's csrcleaner deletes issued CSRs after an hour.
	return Done("Node fake-node-2 registered (its client CSR is gone: issued CSRs are deleted after an hour)")
}

// lab01CSRSubject is the CN a CSR asks for ("" if it does not parse).
func lab01CSRSubject(request []byte) string {
	block, _ := pem.Decode(request)
	if block == nil {
		return ""
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return ""
	}
	return req.Subject.CommonName
}

// lab01Loopback: fake-node-3, its kubelet server on 127.0.0.1 only.
func lab01Loopback(ctx context.Context, kube kubernetes.Interface) Result {
	hint := "start a node on loopback: ./boot.sh --node-name=fake-node-3 --address=127.0.0.1 (README, The kubelet server)"
	n, err := kube.CoreV1().Nodes().Get(ctx, "fake-node-3", metav1.GetOptions{})
	if err != nil {
		return NotYet("Node fake-node-3: "+err.Error(), hint)
	}
	addr := ""
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			addr = a.Address
		}
	}
	target := net.JoinHostPort(addr, strconv.Itoa(int(n.Status.DaemonEndpoints.KubeletEndpoint.Port)))
	if c, err := net.DialTimeout("tcp", target, 2*time.Second); err == nil {
		c.Close()
		return NotYet("fake-node-3's kubelet answers at its InternalIP, "+target+": it was started without --address=127.0.0.1", "stop it and start it again: "+strings.TrimPrefix(hint, "start a node on loopback: "))
	}
	return Done("Node fake-node-3 registered; its kubelet does not answer at %s, where the apiserver dials it (it listens on 127.0.0.1 only)", target)
}
