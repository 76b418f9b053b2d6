package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kubelet-labs/internal/labnames"
)

func init() {
	register("14", labCheck{Title: "kubectl exec into our own node", Check: check14})
}

const (
	node14, spdyNode14 = labnames.Node14, "lab-node-14-spdy"
	visitor14          = labnames.Visitor14
	run14              = "go run ./labs/14-exec --runtime containerd"
)

// check14 looks at what lab 14 leaves while its nodes run: the Node and its
// serving certificate, the pod kubectl exec reached, the visitor's
// certificate and RBAC, and the second node that speaks SPDY.
func check14(ctx context.Context, e *Env) []Result {
	kube, err := e.Kube(ctx)
	if err != nil {
		return NoCluster(err)
	}
	node, err := kube.CoreV1().Nodes().Get(ctx, node14, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return NoCluster(err)
	}
	return []Result{
		nodeServing(node14, node, err, "start the lab (Run it): "+run14),
		servingCert14(e, node),
		podRunningOn(ctx, kube, "shell", node14, "section 1: kubectl apply -f labs/14-exec/shell.yaml, with the lab running"),
		visitorGranted(ctx, kube, e),
		spdyNode(ctx, kube),
	}
}

// nodeServing: the Node is Ready (its lab runs: the Lease is renewed) and
// publishes the port of its server, where the apiserver calls it.
func nodeServing(name string, node *v1.Node, getErr error, hint string) Result {
	if getErr != nil {
		return NotYet(fmt.Sprintf("no Node %s yet", name), hint)
	}
	if !isReady(node) {
		return NotYet(fmt.Sprintf("Node %s is not Ready: its lab is not running", node.Name), hint)
	}
	port := node.Status.DaemonEndpoints.KubeletEndpoint.Port
	if port == 0 {
		return NotYet(fmt.Sprintf("Node %s publishes no server port (status.daemonEndpoints)", node.Name), hint)
	}
	return Done("Node %s Ready, its server at %s:%d (status.addresses, status.daemonEndpoints)", node.Name, internalIP(node), port)
}

func internalIP(n *v1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// servingCert14: the node's serving certificate, from its
// kubelet-serving CSR, signed by the cluster CA for the node's IP.
func servingCert14(e *Env, node *v1.Node) Result {
	const rel = "nodes/" + node14 + "/kubelet-server-current.pem"
	hint := "start the lab (Run it): it asks for its serving certificate through a kubernetes.io/kubelet-serving CSR"
	cert, err := firstCert(e.StatePath("nodes", node14, "kubelet-server-current.pem"))
	if err != nil {
		return NotYet(fmt.Sprintf("no serving certificate in the state folder's %s (%v)", rel, err), hint)
	}
	ca, err := firstCert(e.StatePath("nodes", node14, "ca.crt"))
	if err != nil {
		return NotYet(fmt.Sprintf("no cluster CA in nodes/%s/ca.crt (%v)", node14, err), hint)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	opts := x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if _, err := cert.Verify(opts); err != nil {
		return NotYet(fmt.Sprintf("%s does not verify as a server certificate from the cluster CA: %v", rel, err), hint)
	}
	if node != nil {
		if ip := internalIP(node); ip != "" && !slices.ContainsFunc(cert.IPAddresses, func(a net.IP) bool { return a.Equal(net.ParseIP(ip)) }) {
			return NotYet(fmt.Sprintf("%s is not for the Node's InternalIP %s (it names %v)", rel, ip, cert.IPAddresses), hint)
		}
	}
	return Done("serving certificate %s: %s, issued by %q for %v, valid until %s", rel, cert.Subject.CommonName, cert.Issuer.CommonName, cert.IPAddresses, cert.NotAfter.UTC().Format(time.RFC3339))
}

// firstCert reads the first certificate of a PEM file (a certificate and
// its key in one file is fine).
func firstCert(path string) (*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, fmt.Errorf("no certificate in %s", path)
		}
		if b.Type == "CERTIFICATE" {
			return x509.ParseCertificate(b.Bytes)
		}
	}
}

// podRunningOn: pod default/name runs on node, all its containers ready.
func podRunningOn(ctx context.Context, kube kubernetes.Interface, name, node, hint string) Result {
	p, err := kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return NotYet(fmt.Sprintf("no pod %s", name), hint)
	case err != nil:
		return NotYet(fmt.Sprintf("pod %s: %v", name, err), hint)
	case p.Spec.NodeName != node:
		return NotYet(fmt.Sprintf("pod %s is bound to %q, not %s", name, p.Spec.NodeName, node), hint)
	case p.Status.Phase != v1.PodRunning:
		return NotYet(fmt.Sprintf("pod %s on %s is %s, not Running", name, node, p.Status.Phase), hint)
	}
	return Done("pod %s Running on %s (%d containers): kubectl exec, logs and port-forward reach it through the node's server", name, node, len(p.Spec.Containers))
}

// visitorGranted: the visitor's certificate in the node's folder, and a
// clusterrolebinding that lets the visitor read the node's pods.
func visitorGranted(ctx context.Context, kube kubernetes.Interface, e *Env) Result {
	if _, err := firstCert(e.StatePath("nodes", node14, "visitor.crt")); err != nil {
		return NotYet(fmt.Sprintf("no visitor certificate in nodes/%s/visitor.crt (%v)", node14, err), "start the lab (Run it): it makes the visitor's certificate")
	}
	hint := "section 4: kubectl create clusterrolebinding " + visitor14 + " --clusterrole=system:kubelet-api-admin --user=" + visitor14
	crb, err := kube.RbacV1().ClusterRoleBindings().Get(ctx, visitor14, metav1.GetOptions{})
	if err != nil {
		return NotYet(fmt.Sprintf("visitor certificate nodes/%s/visitor.crt, but no clusterrolebinding %s (%v)", node14, visitor14, err), hint)
	}
	sar, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: visitor14, ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Subresource: "pods", Name: node14}}}, metav1.CreateOptions{})
	if err != nil || !sar.Status.Allowed {
		return NotYet(fmt.Sprintf("clusterrolebinding %s (role %s) does not let %s get nodes/pods (%v)", visitor14, crb.RoleRef.Name, visitor14, err), hint)
	}
	return Done("visitor certificate nodes/%s/visitor.crt; clusterrolebinding %s → %s: the node lets %s in", node14, visitor14, crb.RoleRef.Name, visitor14)
}

// spdyNode: the second node, declaring no ExtendWebSocketsToKubelet, with
// its pod spdy (section 5); the first one declares it.
func spdyNode(ctx context.Context, kube kubernetes.Interface) Result {
	hint := "section 5: go run ./labs/14-exec --runtime containerd --websockets=false --node-name " + spdyNode14 + " --port 10251, then kubectl run spdy …"
	n, err := kube.CoreV1().Nodes().Get(ctx, spdyNode14, metav1.GetOptions{})
	if err != nil {
		return NotYet(fmt.Sprintf("no Node %s", spdyNode14), hint)
	}
	if !isReady(n) {
		return NotYet(fmt.Sprintf("Node %s is not Ready: its lab is not running", spdyNode14), hint)
	}
	if len(n.Status.DeclaredFeatures) > 0 {
		return NotYet(fmt.Sprintf("Node %s declares %s: it was started without --websockets=false", spdyNode14, strings.Join(n.Status.DeclaredFeatures, ", ")), hint)
	}
	if r := podRunningOn(ctx, kube, "spdy", spdyNode14, hint); !r.Done {
		return r
	}
	return Done("Node %s declares no features, so the apiserver sends it SPDY; pod spdy Running there", spdyNode14)
}
