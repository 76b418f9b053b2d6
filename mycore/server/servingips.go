package server

import (
	"context"
	"fmt"
	"net"
	"net/url"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Why an approver of kubelet-serving CSRs must look at the IPs, not only
// at who asks (Kubernetes v1.36.3):
//
//   - Nothing in the cluster approves them: the controller-manager's
//     approver recognises client certificates only, selfnodeclient and
//     nodeclient (pkg/controller/certificates/approver/sarapprove.go:
//     62-76).
//   - The signer checks the form, not the names: subject O=system:nodes,
//     CN system:node:…, the serving usages, at least one DNS or IP SAN, no
//     e-mail or URI SAN (pkg/apis/certificates/helpers.go:68-94
//     ValidateKubeletServingCSR, called by isKubeletServing in
//     pkg/controller/certificates/signer/signer.go:259-264). Any IP an
//     approver lets through is signed by the cluster CA.
//   - A node writes its own status.addresses: the NodeRestriction plugin
//     checks a node's name, labels and taints, not its addresses
//     (plugin/pkg/admission/noderestriction/admission.go:501 admitNode).
//     So "the IP is one of the Node's addresses" is what the node says
//     about itself.
//
// The cluster CA also signed the apiserver's serving certificate, and
// every kubeconfig and every pod (the service account's ca.crt) trusts it
// for servers. A node certificate for the apiserver's IP, for the
// "kubernetes" service's ClusterIP or for 127.0.0.1 therefore lets
// whoever holds the node's key answer as the apiserver on that address.
// ServingIPPolicy refuses those IPs.

// ServingIPPolicy is what an approver refuses in a node's kubelet-serving
// CSR, whatever the Node claims.
type ServingIPPolicy struct {
	// APIServerIPs are the apiserver's own addresses: the one clients dial
	// (the kubeconfig's server), its advertised endpoints and the
	// "kubernetes" service's ClusterIPs.
	APIServerIPs []net.IP
	// ServiceCIDRs is the service range: in-cluster clients dial services
	// there and trust the cluster CA.
	ServiceCIDRs []*net.IPNet
	// AllowLoopback lets 127.0.0.0/8 and ::1 through. Set only when the
	// whole cluster lives on this machine's loopback by design, as the
	// labs' does: the apiserver listens on 127.0.0.1 and dials our node
	// there, so the node's certificate must name 127.0.0.1 — which is also
	// the apiserver's address. That is sound only because whoever could
	// use the node's key on this machine (the learner, the state folder
	// is theirs) already holds the cluster CA's key and the admin
	// kubeconfig. A cluster reached over a real network never needs it.
	AllowLoopback bool
}

// Refuse says why ip must not be in a self-requested serving
// certificate, or nil.
func (p ServingIPPolicy) Refuse(ip net.IP) error {
	switch {
	case ip.IsUnspecified() || ip.IsMulticast():
		return fmt.Errorf("IP %s is not a host's address", ip)
	case ip.IsLoopback() && p.AllowLoopback:
		return nil
	case ip.IsLoopback():
		return fmt.Errorf("IP %s is loopback: signed by the cluster CA it is good for any server on a machine's loopback, the apiserver's included (allowed only when the cluster runs on loopback by design)", ip)
	}
	for _, n := range p.ServiceCIDRs {
		if n.Contains(ip) {
			return fmt.Errorf("IP %s is in the service range %s: pods dial services there (the apiserver as kubernetes.default) and trust the cluster CA", ip, n)
		}
	}
	for _, a := range p.APIServerIPs {
		if a.Equal(ip) {
			return fmt.Errorf("IP %s is the apiserver's own address: with it the node could answer as the apiserver to every client that trusts the cluster CA", ip)
		}
	}
	return nil
}

// ClusterServingIPPolicy reads the policy from the cluster with admin
// credentials: apiserver is the URL clients dial (rest.Config.Host); the
// "kubernetes" service, its EndpointSlices and the ServiceCIDR objects
// (networking.k8s.io/v1) give the rest. loopbackByDesign sets
// AllowLoopback, and only counts when the apiserver itself is dialled on
// loopback: a node's loopback is useless to an apiserver elsewhere. It
// fails rather than approve without knowing the service range.
func ClusterServingIPPolicy(ctx context.Context, admin kubernetes.Interface, apiserver string, loopbackByDesign bool) (ServingIPPolicy, error) {
	var p ServingIPPolicy
	u, err := url.Parse(apiserver)
	if err != nil || u.Hostname() == "" {
		return p, fmt.Errorf("apiserver URL %q has no host", apiserver)
	}
	ips := []net.IP{net.ParseIP(u.Hostname())}
	if ips[0] == nil {
		if ips, err = net.DefaultResolver.LookupIP(ctx, "ip", u.Hostname()); err != nil {
			return p, fmt.Errorf("resolve the apiserver's host %s: %w", u.Hostname(), err)
		}
	}
	p.APIServerIPs = ips
	p.AllowLoopback = loopbackByDesign
	for _, ip := range ips {
		p.AllowLoopback = p.AllowLoopback && ip.IsLoopback()
	}

	svc, err := admin.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		return p, fmt.Errorf("read service default/kubernetes: %w", err)
	}
	for _, s := range svc.Spec.ClusterIPs {
		if ip := net.ParseIP(s); ip != nil {
			p.APIServerIPs = append(p.APIServerIPs, ip)
		}
	}
	// The apiserver's advertised addresses (none when its endpoint
	// reconciler is off, as on lab 00).
	slices, err := admin.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kubernetes"})
	if err != nil {
		return p, fmt.Errorf("read the kubernetes service's EndpointSlices: %w", err)
	}
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			for _, a := range e.Addresses {
				if ip := net.ParseIP(a); ip != nil {
					p.APIServerIPs = append(p.APIServerIPs, ip)
				}
			}
		}
	}
	cidrs, err := admin.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
	if err != nil {
		return p, fmt.Errorf("read the service range (kubectl get servicecidrs): %w", err)
	}
	for _, c := range cidrs.Items {
		for _, s := range c.Spec.CIDRs {
			_, n, err := net.ParseCIDR(s)
			if err != nil {
				return p, fmt.Errorf("ServiceCIDR %s: %w", c.Name, err)
			}
			p.ServiceCIDRs = append(p.ServiceCIDRs, n)
		}
	}
	if len(p.ServiceCIDRs) == 0 {
		return p, fmt.Errorf("the cluster has no ServiceCIDR: cannot tell the service range, so no serving CSR is approved")
	}
	return p, nil
}
