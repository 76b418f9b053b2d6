package fleet

import (
	"context"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
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

// impersonateNodes makes every request whose context names a node (see
// asNode) impersonate that node, as a kubelet with its own certificate
// would authenticate: the apiserver's Node authorizer and NodeRestriction
// admission then check it as that node (its own Node, Lease and pods
// only), and API Priority and Fairness queues it as a node (heartbeats in
// system-node-high, the rest in system-nodes, fairly per node). Requests
// without a node (the shared informers) keep the credential's own user.
//
// One connection, one credential: the credential must be allowed to
// impersonate (the admin is). A fleet with a certificate per node would
// be a thousand TLS sessions for the same checks.
func impersonateNodes(cfg *rest.Config) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			name, ok := req.Context().Value(nodeKey{}).(string)
			if !ok {
				return rt.RoundTrip(req)
			}
			req = req.Clone(req.Context()) // a RoundTripper must not change its request
			req.Header.Set(authenticationv1.ImpersonateUserHeader, "system:node:"+name)
			req.Header.Del(authenticationv1.ImpersonateGroupHeader)
			req.Header.Add(authenticationv1.ImpersonateGroupHeader, "system:nodes")
			req.Header.Add(authenticationv1.ImpersonateGroupHeader, "system:authenticated")
			return rt.RoundTrip(req)
		})
	})
}
