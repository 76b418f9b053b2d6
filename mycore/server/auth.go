package server

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	kubeletserver "k8s.io/kubernetes/pkg/kubelet/server"
)

// The kubelet's authorization webhook cache (KubeletConfiguration
// authorization.webhook.cacheAuthorizedTTL / cacheUnauthorizedTTL).
const (
	DefaultAuthorizedTTL   = 5 * time.Minute
	DefaultUnauthorizedTTL = 30 * time.Second
)

// auth is the kubelet's KubeletAuth (pkg/kubelet/server/auth.go:38-52) for
// a node that accepts client certificates only: an x509 authenticator, the
// kubelet's request-to-attributes mapping (with one change: streamPaths),
// and a SubjectAccessReview authorizer.
type auth struct {
	authn authenticator.Request
	attrs kubeletserver.NodeRequestAttributesGetter
	authz authorizer.Authorizer
}

func newAuth(cfg Config, clientCAs *x509.CertPool) (*auth, error) {
	// The x509 authenticator the kubelet builds (cmd/kubelet/app/auth.go:
	// 70-105): user = the certificate's CN, groups = its O. The TLS layer
	// has verified the chain already; this checks it again with the same
	// pool and turns it into a user.
	opts := x509request.DefaultVerifyOptions()
	opts.Roots = clientCAs
	authn := x509request.New(opts, x509request.CommonNameUserConversion)

	allowTTL, denyTTL := cfg.AuthorizedTTL, cfg.UnauthorizedTTL
	if allowTTL == 0 {
		allowTTL = DefaultAuthorizedTTL
	}
	if denyTTL == 0 {
		denyTTL = DefaultUnauthorizedTTL
	}
	// BuildAuthz in webhook mode (cmd/kubelet/app/auth.go:122-150): every
	// decision is a SubjectAccessReview sent as the node, cached.
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: cfg.Client.AuthorizationV1(),
		AllowCacheTTL:             allowTTL,
		DenyCacheTTL:              denyTTL,
		// genericoptions.DefaultAuthWebhookRetryBackoff, the kubelet's.
		WebhookRetryBackoff: &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5},
	}.New()
	if err != nil {
		return nil, fmt.Errorf("node server: authorizer: %w", err)
	}
	return &auth{
		authn: authn,
		// Which subresource a path needs is the contract between kubelets
		// and RBAC roles such as system:kubelet-api-admin: our mapping is
		// the kubelet's (auth_attributes.go; a test holds it to upstream's
		// NewNodeAuthorizerAttributesGetter), but for the verb of the
		// streaming paths.
		attrs: nodeAttributes{nodeName: cfg.NodeName},
		authz: authz,
	}, nil
}

// streamPaths run a process in a pod or open a stream into it. /run is not
// served (upstream serves it on POST only, server.go:573-580); it is listed
// so that serving it later cannot reopen the door.
//
// A request on a streamPath needs `create nodes/proxy`, whatever its HTTP
// method (nodeRequestAttributes): the one place where our mapping differs
// from the kubelet's. Upstream derives the verb from the method
// (auth.go:86-97), and serves exec, attach and port-forward on GET as well
// as POST (server.go:586-633), because a WebSocket handshake is always a
// GET. So `get nodes/proxy` — a grant that reads like read-only access,
// given to monitoring agents — opens a shell in every pod of the node; the
// Kubernetes docs warn that it "is not a read-only permission" (RBAC good
// practices, "Access to proxy subresource of Nodes"). The apiserver closed
// the same gap for pods/exec, pods/attach and pods/portforward with
// AuthorizePodWebsocketUpgradeCreatePermission (beta, on since 1.35:
// pkg/features/kube_features.go:1273-1275; pkg/registry/core/pod/rest/
// subresources.go:116-122, 191-197, 277-283), re-asking with verb create as
// overrideVerb does (pkg/registry/core/pod/rest/authorize.go:38-72); the
// kubelet of 1.36.3 has no such rule. The apiserver's own client holds `*`
// on nodes/proxy (system:kubelet-api-admin, plugin/pkg/auth/authorizer/
// rbac/bootstrappolicy/policy.go:582), so kubectl exec is unaffected.
var streamPaths = []string{"/exec", "/attach", "/portForward", "/run"}

// isStreamPath matches a streamPath and everything under it, as the
// kubelet's isSubpath matches its paths (auth.go:64-67): /exec and
// /exec/…, not /execute.
func isStreamPath(path string) bool {
	for _, p := range streamPaths {
		if isSubpath(path, p) {
			return true
		}
	}
	return false
}

// isSubpath is the kubelet's isSubpath (auth.go:64-67): subpath is path or
// under it, path's trailing slash ignored — "/stats/" matches /stats and
// /stats/summary, not /statsfoo.
func isSubpath(subpath, path string) bool {
	path = strings.TrimSuffix(path, "/")
	return subpath == path || (strings.HasPrefix(subpath, path) && subpath[len(path)] == '/')
}

// nodeAttributes is the kubelet's NodeRequestAttributesGetter
// (auth.go:55-62) over our nodeRequestAttributes.
type nodeAttributes struct{ nodeName string }

func (n nodeAttributes) GetRequestAttributes(_ context.Context, u user.Info, r *http.Request) []authorizer.Attributes {
	return nodeRequestAttributes(n.nodeName, u, r)
}

// filter authenticates and authorizes every request before it reaches a
// handler, as InstallAuthFilter does (server.go:370-422), and logs one
// line per request.
func (s *Server) filter(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.active.enter() {
			http.Error(w, "node server is stopping", http.StatusServiceUnavailable)
			return
		}
		defer s.active.leave()
		start := time.Now()
		who, verdict := "?", ""
		line := func() string {
			return fmt.Sprintf("%s %s%s user=%s %s", r.Method, r.URL.RequestURI(), upgrade(r), who, verdict)
		}
		// An upgraded stream is logged when it opens and when it ends.
		rec := &recorder{ResponseWriter: w, onHijack: func() { s.logf("%s→ upgraded: streaming", line()) }}
		defer func() {
			status := fmt.Sprint(rec.status)
			if rec.hijacked {
				status = "stream closed"
			}
			s.logf("%s→ %s after %s", line(), status, time.Since(start).Round(time.Millisecond))
		}()

		resp, ok, err := s.auth.authn.AuthenticateRequest(r)
		if err != nil || !ok {
			http.Error(rec, "Unauthorized", http.StatusUnauthorized)
			return
		}
		u := resp.User
		who = u.GetName()
		if g := u.GetGroups(); len(g) > 0 {
			who += " groups=" + strings.Join(g, ",")
		}

		// The request may need one of several subresources (/pods:
		// nodes/pods or nodes/proxy); any one allowed is enough.
		attrs := s.auth.attrs.GetRequestAttributes(r.Context(), u, r)
		var subresources []string
		allowed := false
		for _, a := range attrs {
			subresources = append(subresources, a.GetSubresource())
			decision, _, err := s.auth.authz.Authorize(r.Context(), a)
			if err != nil {
				verdict = fmt.Sprintf("authz error (%v) ", err)
				http.Error(rec, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=%s, subresource=%s)", u.GetName(), a.GetVerb(), a.GetResource(), a.GetSubresource()), http.StatusInternalServerError)
				return
			}
			if decision == authorizer.DecisionAllow {
				allowed = true
				verdict = fmt.Sprintf("%s nodes/%s: allowed ", a.GetVerb(), a.GetSubresource())
				break
			}
		}
		if !allowed {
			if len(attrs) == 0 {
				http.Error(rec, "Authorization error: could not determine attributes for request", http.StatusForbidden)
				return
			}
			verdict = fmt.Sprintf("%s nodes/%s: forbidden ", attrs[0].GetVerb(), strings.Join(subresources, "|"))
			// The kubelet's exact message (server.go:415).
			http.Error(rec, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=%s, subresource(s)=%v)", u.GetName(), attrs[0].GetVerb(), attrs[0].GetResource(), subresources), http.StatusForbidden)
			return
		}
		next.ServeHTTP(rec, r)
	})
}

// upgrade names the stream protocol a request asks to switch to: SPDY
// with the remotecommand version, or a WebSocket with its subprotocols
// (v5.channel.k8s.io; SPDY/3.1+portforward.k8s.io when SPDY is tunneled
// inside the WebSocket).
func upgrade(r *http.Request) string {
	u := r.Header.Get("Upgrade")
	if u == "" {
		return ""
	}
	protos := r.Header.Values("X-Stream-Protocol-Version")
	if strings.EqualFold(u, "websocket") {
		protos = r.Header.Values("Sec-Websocket-Protocol")
	}
	return fmt.Sprintf(" [upgrade %s: %s]", u, strings.Join(protos, ","))
}

// recorder notes the status of a response, and passes through what the
// handlers need from the real writer: Flush (followed logs) and Hijack
// (the upgrade of exec, attach and port-forward).
type recorder struct {
	http.ResponseWriter
	status   int
	hijacked bool
	onHijack func()
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(p)
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := r.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the response writer cannot be hijacked")
	}
	c, rw, err := h.Hijack()
	if err == nil {
		r.hijacked = true
		r.onHijack()
	}
	return c, rw, err
}

// Unwrap lets http.ResponseController reach the real writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
