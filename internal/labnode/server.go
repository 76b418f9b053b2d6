package labnode

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apiserver/pkg/server/healthz"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/mycore/node"
	"kubelet-labs/mycore/server"
)

// ServerOptions describe the node server (lab 14) of a node that has one.
type ServerOptions struct {
	// Address the server listens on; NodeIP the InternalIP the Node
	// publishes, which the apiserver dials. Both "": the address on this
	// machine's route to the apiserver (mycore/node ChooseNodeIP), which
	// is 127.0.0.1 on lab 00 and the Docker bridge's address on kind; the
	// server listens there. Address alone: NodeIP is Address, or, for
	// 0.0.0.0, the address on the route to the apiserver unless that is
	// loopback (then the default route's). NodeIP alone: the server
	// listens there.
	Address, NodeIP string
	// Port of the server (0 picks a free one).
	Port int
	// WebSockets: declare ExtendWebSocketsToKubelet in the Node's status
	// and serve WebSocket v5, as a 1.36 kubelet does.
	WebSockets bool
	// UnauthorizedTTL: how long a denied SubjectAccessReview is cached
	// (0: the kubelet's 30 s).
	UnauthorizedTTL time.Duration
}

// features are what the Node declares its server supports.
func (s ServerOptions) features() []string {
	if s.WebSockets {
		return []string{server.WebSocketsFeature}
	}
	return nil
}

// listen takes the server's port and sets the node's IP and URL: the
// apiserver dials the IP the Node publishes, so the server listens there.
// What the flags leave open, the route to the apiserver decides.
func (n *Node) listen(ctx context.Context, s ServerOptions, out *labenv.Printer) (net.Listener, error) {
	listen, ip, err := serverAddresses(s.Address, s.NodeIP)
	if err != nil {
		return nil, err
	}
	if ip == nil {
		// Listening on all addresses, a node may publish loopback only
		// when it listens there alone: with 0.0.0.0 it publishes this
		// machine's address, as before the route was asked.
		c, err := node.ChooseNodeIP(ctx, n.Admin, n.Host, listen == nil)
		if err != nil {
			return nil, fmt.Errorf("cannot tell which address of this machine the apiserver can reach the node at: %v; give it with --address", err)
		}
		out.Printf("address   %s", c)
		if ip = c.IP; listen == nil {
			listen = ip
		}
	}
	ln, err := server.Listen(listen.String(), s.Port)
	if err != nil {
		return nil, err
	}
	n.closers = append(n.closers, func() { ln.Close() })
	n.IP = ip
	n.URL = "https://" + net.JoinHostPort(ip.String(), fmt.Sprint(ln.Addr().(*net.TCPAddr).Port))
	return ln, nil
}

// servingCertificate gets the server's certificate through a
// kubernetes.io/kubelet-serving CSR made as the node and approved as
// admin, and writes the cluster CA beside it for curl. The course runs on
// loopback by design (lab 00's apiserver on 127.0.0.1 dials our node on
// 127.0.0.1), so the approver lets 127.0.0.1 through when the apiserver is
// on loopback too; the apiserver's other addresses and the service range
// it refuses always (mycore/server ServingIPPolicy says why).
func (n *Node) servingCertificate(ctx context.Context, timeout time.Duration, out *labenv.Printer) (err error) {
	n.ServingCert, err = server.ServingCertificate(ctx, server.ServingCertOptions{
		NodeName: n.Name, Client: n.Joined.Client, IPs: []net.IP{n.IP}, Dir: n.Dir, CA: n.CA,
		Approve: server.AdminApprover(n.Admin, server.ApproverOptions{APIServer: n.Host, LoopbackByDesign: true}), Timeout: timeout, Log: out.Indented(),
	})
	if err != nil {
		return err
	}
	n.CAFile = filepath.Join(n.Dir, "ca.crt")
	return os.WriteFile(n.CAFile, n.CA, 0o644)
}

// serve builds the server on ln: the pod manager says which pods are
// ours, the runtime finds their containers and streams; /healthz includes
// the PLEG's.
func (n *Node) serve(ln net.Listener, s ServerOptions, out *labenv.Printer) (err error) {
	k := n.Kubelet
	n.Server, err = server.New(server.Config{
		NodeName: n.Name, Listener: ln, Certificate: n.ServingCert.Certificate, ClientCA: n.CA, Client: n.Joined.Client,
		Pods: k.Pods(), Runtime: n.Runtime.CRI.Runtime, WebSockets: s.WebSockets, UnauthorizedTTL: s.UnauthorizedTTL,
		HealthChecks: []healthz.HealthChecker{healthz.NamedCheck("pleg", func(*http.Request) error { return k.Healthy() })},
		Log:          func(f string, a ...any) { out.Stamped("server  "+f, a...) },
		Journal:      k.Journal(),
	})
	if err != nil {
		return err
	}
	out.Printf("serving   %s: TLS with %s; clients need a certificate from the cluster CA, and every request is a SubjectAccessReview; upstream's own log lines go to %s",
		n.URL, n.ServingCert.Path, n.KlogFile)
	return nil
}

// serverAddresses checks the flags and says what they decide: the
// address to listen on and the InternalIP to publish (the apiserver dials
// it, so the server must listen there). nil is what the route to the
// apiserver decides: both, with neither flag; the IP, with --address
// 0.0.0.0 alone.
func serverAddresses(address, flagIP string) (listen, ip net.IP, err error) {
	if address != "" {
		if listen = net.ParseIP(address); listen == nil {
			return nil, nil, fmt.Errorf("--address %q is not an IP address", address)
		}
	}
	if flagIP != "" {
		if ip = net.ParseIP(flagIP); ip == nil {
			return nil, nil, fmt.Errorf("--node-ip %q is not an IP address", flagIP)
		}
	}
	switch {
	case listen == nil:
		return ip, ip, nil
	case ip == nil && !listen.IsUnspecified():
		return listen, listen, nil
	case ip != nil && !listen.IsUnspecified() && !listen.Equal(ip):
		return nil, nil, fmt.Errorf("--node-ip %s but --address %s: the apiserver dials the node IP, so the server must listen there (--address %s or 0.0.0.0)", ip, listen, ip)
	}
	return listen, ip, nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
