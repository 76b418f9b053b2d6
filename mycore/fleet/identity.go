package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// nodeKey carries, in a request's context, the node the request is made
// for.
type nodeKey struct{}

// asNode returns a context whose requests, through a client wrapped by
// impersonateNodes, act as the node: user system:node:NAME in group
// system:nodes. Its klog logger names the node too.
func asNode(ctx context.Context, name string) context.Context {
	ctx = context.WithValue(ctx, nodeKey{}, name)
	return klog.NewContext(ctx, klog.FromContext(ctx).WithValues("node", name))
}

// ErrNoNode: a write whose context names no node (see asNode). The fleet
// refuses it before anything is sent: every write of a fleet is one node's,
// and the fleet's own identity (IdentityUser) may only read.
var ErrNoNode = errors.New("fleet: a write that names no node (the request's context has no asNode): refused, nothing sent; every write of the fleet is one node's")

// impersonateNodes makes every request whose context names a node (see
// asNode) impersonate that node, as a kubelet with its own certificate
// would authenticate: user system:node:NAME in group system:nodes, the two
// things the apiserver's node identifier reads
// (pkg/auth/nodeidentifier/default.go:40-60, v1.36.3). The Node authorizer
// and NodeRestriction admission then check it as that node (its own Node,
// Lease and pods only), and API Priority and Fairness queues it as a node
// (heartbeats in system-node-high, the rest in system-nodes, fairly per
// node). The group system:authenticated is not asked for: the apiserver
// adds it to every impersonated user that is not anonymous
// (k8s.io/apiserver/pkg/endpoints/filters/impersonation/mode.go:365-369,
// and impersonation.go:126-144 with the ConstrainedImpersonation gate off),
// and asking would need one more impersonate permission.
//
// A request that names no node goes as the credential's own user — the
// fleet's identity (IdentityUser), which may list and watch nodes for the
// shared Node informer and nothing else — and only if it is a read
// (GET: get, list, watch). A write that names no node is a bug (a library
// call that dropped the context): it is refused here with ErrNoNode, before
// anything is sent, rather than sent as whoever the credential is.
//
// One connection, one credential: the credential must be allowed to
// impersonate the fleet's nodes (ensureIdentity's ClusterRole). A fleet
// with a certificate per node would be a thousand TLS sessions for the
// same checks.
func impersonateNodes(cfg *rest.Config) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return wrap(rt, func(req *http.Request) (*http.Response, error) {
			name, ok := req.Context().Value(nodeKey{}).(string)
			if !ok {
				if req.Method != http.MethodGet {
					if req.Body != nil {
						req.Body.Close() // a RoundTripper closes the body, even on error
					}
					return nil, fmt.Errorf("%w: %s %s", ErrNoNode, req.Method, req.URL.Path)
				}
				return rt.RoundTrip(req)
			}
			req = req.Clone(req.Context()) // a RoundTripper must not change its request
			req.Header.Set(authenticationv1.ImpersonateUserHeader, "system:node:"+name)
			req.Header.Del(authenticationv1.ImpersonateGroupHeader)
			req.Header.Add(authenticationv1.ImpersonateGroupHeader, "system:nodes")
			return rt.RoundTrip(req)
		})
	})
}

// heartbeatClient is the client of every node's Lease and node status.
// Both go as the node, like every other request of it: the lease
// controller passes its context (see asNode) on every call, but
// nodeutil.PatchNodeStatus, which the status reporter uses as the kubelet
// does, makes its request with context.TODO(). forNode gives each status
// reporter a client whose requests carry the node in their context
// anyway — else a thousand status patches go as the credential's own
// user, which priority and fairness exempts (an admin's), and crowd out
// the nodes' own heartbeats on a busy apiserver instead of waiting in the
// nodes' queue (system-node-high) like a kubelet's.
type heartbeatClient struct {
	kubernetes.Interface
	cfg         *rest.Config
	http        *http.Client
	impersonate bool
}

// newHeartbeatClient makes the heartbeat client of hc, whose transport
// (connection) a group of nodes shares and whose Timeout is the
// heartbeats' own.
func newHeartbeatClient(cfg *rest.Config, hc *http.Client, impersonate bool) (*heartbeatClient, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.RateLimiter = -1, nil // never limited
	cfg.Timeout = hc.Timeout
	c, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	return &heartbeatClient{Interface: c, cfg: cfg, http: hc, impersonate: impersonate}, nil
}

// forNode is the client for one node's status reporter: the same
// connection, its CoreV1 requests made as the node.
func (h *heartbeatClient) forNode(name string) (kubernetes.Interface, error) {
	if !h.impersonate {
		return h.Interface, nil
	}
	next := h.http.Transport
	hc := &http.Client{Timeout: h.http.Timeout, Transport: wrap(next, func(req *http.Request) (*http.Response, error) {
		if _, ok := req.Context().Value(nodeKey{}).(string); !ok {
			req = req.WithContext(context.WithValue(req.Context(), nodeKey{}, name))
		}
		return next.RoundTrip(req)
	})}
	core, err := corev1client.NewForConfigAndClient(h.cfg, hc)
	if err != nil {
		return nil, err
	}
	return nodeCoreClient{Interface: h.Interface, core: core}, nil
}

// nodeCoreClient is a clientset whose CoreV1 is one node's.
type nodeCoreClient struct {
	kubernetes.Interface
	core corev1client.CoreV1Interface
}

func (c nodeCoreClient) CoreV1() corev1client.CoreV1Interface { return c.core }
