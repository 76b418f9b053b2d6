package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
)

// Which address a node publishes as its InternalIP matters because the
// apiserver dials it: for kubectl logs, exec and port-forward it connects
// to the node's preferred address (--kubelet-preferred-address-types,
// InternalIP first; pkg/util/node/node.go:49 GetPreferredNodeAddress,
// Kubernetes v1.36.3) at status.daemonEndpoints' port.
//
// The kubelet, given no --node-ip, picks the address of the node's name in
// DNS, else the address of the interface of the default route
// (pkg/kubelet/nodestatus/setters.go:151-178; the last step is
// k8s.io/apimachinery pkg/util/net/interface.go:481 ResolveBindAddress),
// and refuses loopback (pkg/kubelet/kubelet_node_status.go:714
// validateNodeIP). That answers "which address has this machine?", and on
// a real node every address of it is reachable from the control plane.
// Our labs ask a narrower question, because the apiserver may sit where
// only some of this machine's addresses reach: lab 00's apiserver is on
// this machine's loopback, kind's is in a Docker container on the bridge
// network "kind", whose only way back to this machine is the bridge's
// address. ChooseNodeIP therefore asks the kernel which of this machine's
// addresses its route to the apiserver leaves from — the address the
// apiserver sees our packets come from, so the one it can dial back.
//
// Where the apiserver is: not the kubeconfig's server, which on kind is a
// Docker port forward on 127.0.0.1, but the address it advertises
// (--advertise-address) in the "kubernetes" service's EndpointSlice in
// namespace default, which it writes itself (pkg/controlplane/reconcilers/
// lease.go:172 ReconcileEndpoints, mirrored into the EndpointSlice by
// endpointsadapter.go:83). Lab 00 runs its apiserver with
// --endpoint-reconciler-type=none, so that slice does not exist there; then
// the kubeconfig's server is where the apiserver is (on lab 00 it listens
// on 127.0.0.1 itself).

// NodeIPChoice is the address a node publishes so that the apiserver can
// dial it back, and how it was found.
type NodeIPChoice struct {
	// IP is this machine's address for the node's InternalIP (and for
	// its server to listen on).
	IP net.IP
	// APIServer is the apiserver's address (host:port) the route was
	// asked for; From says where it was read.
	APIServer, From string
	// DefaultRoute is set when the route to the apiserver stays on
	// loopback and the caller refused loopback: IP is then the address
	// of the default route, as the kubelet picks it.
	DefaultRoute bool
}

// String says what the lab prints: the address and why it is that one.
func (c NodeIPChoice) String() string {
	if c.DefaultRoute {
		return fmt.Sprintf("%s, the default route's address: the route to the apiserver at %s (%s) stays on loopback", c.IP, c.APIServer, c.From)
	}
	return fmt.Sprintf("%s, this machine's address on the route to the apiserver at %s (%s)", c.IP, c.APIServer, c.From)
}

// lookupTimeout bounds reading the EndpointSlice and resolving the
// kubeconfig's host name: a lab that cannot tell says so, it does not hang.
const lookupTimeout = 10 * time.Second

// ChooseNodeIP finds the address of this machine the apiserver can reach
// the node at: the source address of this machine's route to the
// apiserver's advertised address (see above). admin reads the "kubernetes"
// EndpointSlice; apiserverURL is the kubeconfig's server, used when the
// apiserver advertises nothing. allowLoopback says whether the node may
// publish loopback (the labs' own nodes on lab 00 do; lab 01's real
// kubelet refuses it): if not and the route stays on loopback, the
// default route's address is taken instead, as the kubelet takes it.
//
// The route is asked of the kernel with connect(2) on a UDP socket, which
// picks the route and its source address and sends nothing; no route is
// an error at once, never a wait.
func ChooseNodeIP(ctx context.Context, admin kubernetes.Interface, apiserverURL string, allowLoopback bool) (NodeIPChoice, error) {
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	targets, from, err := apiserverAddresses(ctx, admin, apiserverURL)
	if err != nil {
		return NodeIPChoice{}, err
	}
	var failed []string
	for _, t := range targets {
		ip, err := routeSource(t)
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", t, err))
			continue
		}
		c := NodeIPChoice{IP: ip, APIServer: t, From: from}
		if ip.IsLoopback() && !allowLoopback {
			all := net.IPv4zero // of the route's family
			if ip.To4() == nil {
				all = net.IPv6unspecified
			}
			if c.IP, err = utilnet.ResolveBindAddress(all); err != nil {
				return NodeIPChoice{}, fmt.Errorf("the route to the apiserver at %s stays on loopback, and this machine has no default route to take an address from: %v", t, err)
			}
			c.DefaultRoute = true
		}
		return c, nil
	}
	return NodeIPChoice{}, fmt.Errorf("no route from this machine to the apiserver (%s): %s", from, strings.Join(failed, "; "))
}

// apiserverAddresses are the addresses (host:port) the apiserver
// advertises in the "kubernetes" EndpointSlice, ready ones only, or else
// the kubeconfig's server; and where they were read.
func apiserverAddresses(ctx context.Context, admin kubernetes.Interface, apiserverURL string) ([]string, string, error) {
	list, err := admin.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).List(ctx,
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kubernetes"})
	if err != nil {
		return nil, "", fmt.Errorf("read the \"kubernetes\" EndpointSlice in namespace default, where the apiserver advertises its address: %w", err)
	}
	// In name order: the same answer every time.
	slices.SortFunc(list.Items, func(a, b discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	var out []string
	from := ""
	for _, s := range list.Items {
		port := slicePort(s)
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				if net.ParseIP(a) == nil {
					continue // an FQDN slice: not an address to route to
				}
				out = append(out, net.JoinHostPort(a, port))
				if from == "" {
					from = "advertised in EndpointSlice default/" + s.Name
				}
			}
		}
	}
	if len(out) > 0 {
		return out, from, nil
	}

	u, err := url.Parse(apiserverURL)
	if err != nil || u.Hostname() == "" {
		return nil, "", fmt.Errorf("the kubeconfig's server %q has no host, and the apiserver advertises no address in EndpointSlice default/kubernetes", apiserverURL)
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	from = "the kubeconfig's server; EndpointSlice default/kubernetes lists no address"
	if net.ParseIP(strings.SplitN(u.Hostname(), "%", 2)[0]) != nil {
		return []string{net.JoinHostPort(u.Hostname(), port)}, from, nil
	}
	ips, err := net.DefaultResolver.LookupIP(ctx, "ip", u.Hostname())
	if err != nil {
		return nil, "", fmt.Errorf("resolve the kubeconfig's server %s: %w", u.Hostname(), err)
	}
	for _, ip := range ips {
		out = append(out, net.JoinHostPort(ip.String(), port))
	}
	return out, from, nil
}

// slicePort is the apiserver's port in its EndpointSlice: the one named
// https (as the apiserver names it), else the first.
func slicePort(s discoveryv1.EndpointSlice) string {
	port := "443"
	for i, p := range s.Ports {
		if p.Port == nil {
			continue
		}
		if i == 0 || (p.Name != nil && *p.Name == "https") {
			port = strconv.Itoa(int(*p.Port))
		}
	}
	return port
}

// routeSource is the source address of this machine's route to hostport.
func routeSource(hostport string) (net.IP, error) {
	c, err := net.Dial("udp", hostport)
	if err != nil {
		// "connect: network is unreachable", without the repeated address
		var op *net.OpError
		if errors.As(err, &op) {
			return nil, op.Err
		}
		return nil, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP, nil
}
