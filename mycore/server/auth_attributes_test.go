package server

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubeletserver "k8s.io/kubernetes/pkg/kubelet/server"
)

// The graders of the build-it stage node-server-authz
// (auth_attributes.go): what a request to the node server must be allowed
// to do, and the SubjectAccessReview the node sends to ask. All in memory:
// no control plane, no TLS.

const authzNode = "node-a"

// apiserverUser is who kubectl exec, logs and port-forward reach the node
// as: the apiserver's --kubelet-client-certificate.
var apiserverUser = &user.DefaultInfo{Name: "kube-apiserver-kubelet-client", Groups: []string{"kubeadm:cluster-admins", "system:authenticated"}}

func request(method, path string) *http.Request {
	return httptest.NewRequest(method, "https://127.0.0.1:10250"+path, nil)
}

func subresourcesOf(attrs []authorizer.Attributes) []string {
	subs := []string{}
	for _, a := range attrs {
		subs = append(subs, a.GetSubresource())
	}
	return subs
}

// The verb is the HTTP method's (auth.go:86-97).
func TestNodeRequestAttributesVerb(t *testing.T) {
	for _, tc := range []struct{ method, want string }{
		{http.MethodGet, "get"},
		{http.MethodPost, "create"},
		{http.MethodPut, "update"},
		{http.MethodPatch, "patch"},
		{http.MethodDelete, "delete"},
		{http.MethodHead, ""},
		{http.MethodOptions, ""},
	} {
		for _, path := range []string{"/pods", "/containerLogs/default/web/app", "/stats/summary"} {
			attrs := nodeRequestAttributes(authzNode, apiserverUser, request(tc.method, path))
			if len(attrs) == 0 {
				t.Errorf("%s %s: no attributes, want verb %q: every request asks at least one question (auth.go:117-133 always adds one subresource)", tc.method, path, tc.want)
				continue
			}
			for _, a := range attrs {
				if a.GetVerb() != tc.want {
					t.Errorf("%s %s: verb %q, want %q: the kubelet takes the verb from the HTTP method — POST create, GET get, PUT update, PATCH patch, DELETE delete, anything else \"\" (pkg/kubelet/server/auth.go:86-97, v1.36.3)", tc.method, path, a.GetVerb(), tc.want)
				}
			}
		}
	}
}

// The subresources a path is filed under, in the order they are asked
// (auth.go:102-133).
func TestNodeRequestAttributesSubresources(t *testing.T) {
	for _, tc := range []struct {
		path string
		want []string
		why  string
	}{
		{"/pods", []string{"pods", "proxy"}, "/pods is nodes/pods first (fine-grained, auth.go:104-105), then nodes/proxy as before 1.32 (auth.go:131-132)"},
		{"/pods/", []string{"pods", "proxy"}, "isSubpath matches the path and what is under it (auth.go:64-67)"},
		{"/runningpods/", []string{"pods", "proxy"}, "/runningpods/ is nodes/pods then nodes/proxy (auth.go:112-113)"},
		{"/healthz", []string{"healthz", "proxy"}, "/healthz is nodes/healthz then nodes/proxy (auth.go:106-107)"},
		{"/healthz/ping", []string{"healthz", "proxy"}, "a path under /healthz is /healthz's (isSubpath, auth.go:64-67)"},
		{"/configz", []string{"configz", "proxy"}, "/configz is nodes/configz then nodes/proxy (auth.go:108-109)"},
		{"/stats/summary", []string{"stats"}, "/stats/ is nodes/stats only (auth.go:118-119)"},
		{"/stats", []string{"stats"}, "isSubpath ignores the trailing slash of /stats/ (auth.go:65)"},
		{"/metrics", []string{"metrics"}, "/metrics is nodes/metrics only (auth.go:120-121)"},
		{"/metrics/cadvisor", []string{"metrics"}, "a path under /metrics is nodes/metrics (auth.go:120-121)"},
		{"/logs/syslog", []string{"log"}, "/logs/ is nodes/log — \"log\", as pods/log (auth.go:122-124)"},
		{"/checkpoint/default/web/app", []string{"checkpoint"}, "/checkpoint/ is nodes/checkpoint (auth.go:125-126)"},
		{"/statusz", []string{"statusz"}, "/statusz is nodes/statusz (auth.go:127-128)"},
		{"/flagz", []string{"configz"}, "/flagz is nodes/configz, without proxy (auth.go:129-130)"},
		{"/containerLogs/default/web/app", []string{"proxy"}, "a path the list does not name is nodes/proxy (auth.go:131-132)"},
		{"/exec/default/web/app", []string{"proxy"}, "exec is nodes/proxy (auth.go:131-132)"},
		{"/attach/default/web/app", []string{"proxy"}, "attach is nodes/proxy (auth.go:131-132)"},
		{"/portForward/default/web", []string{"proxy"}, "port-forward is nodes/proxy (auth.go:131-132)"},
		{"/podsfoo", []string{"proxy"}, "/podsfoo is not under /pods: isSubpath wants the path or path + \"/\" (auth.go:64-67)"},
		{"/statsfoo", []string{"proxy"}, "/statsfoo is not under /stats/ (auth.go:64-67)"},
		{"/", []string{"proxy"}, "the root is nodes/proxy (auth.go:131-132)"},
	} {
		got := subresourcesOf(nodeRequestAttributes(authzNode, apiserverUser, request(http.MethodGet, tc.path)))
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("GET %s: subresources %v, want %v: %s (pkg/kubelet/server/auth.go, v1.36.3)", tc.path, got, tc.want, tc.why)
		}
	}
}

// Exec, attach, port-forward and run need create, whatever the method:
// ours, not upstream's (streamPaths in auth.go says why).
func TestNodeRequestAttributesStreamsNeedCreate(t *testing.T) {
	for _, path := range []string{"/exec/default/web/app", "/exec/default/web/0b9e6b55/app", "/attach/default/web/app", "/portForward/default/web", "/run/default/web/app", "/exec"} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			attrs := nodeRequestAttributes(authzNode, apiserverUser, request(method, path))
			if len(attrs) == 0 {
				t.Errorf("%s %s: no attributes, want one asking create nodes/proxy (pkg/kubelet/server/auth.go:131-132 files stream paths under proxy; the verb is ours, see isStreamPath)", method, path)
			}
			for _, a := range attrs {
				if a.GetVerb() != "create" {
					t.Errorf("%s %s: verb %q, want \"create\": a WebSocket handshake is a GET, so upstream's GET → get (pkg/kubelet/server/auth.go:86-97, v1.36.3) lets `get nodes/proxy` open a shell; our node asks create on every stream path (isStreamPath)", method, path, a.GetVerb())
				}
			}
		}
	}
	for _, path := range []string{"/execute", "/containerLogs/default/web/app", "/pods"} {
		attrs := nodeRequestAttributes(authzNode, apiserverUser, request(http.MethodGet, path))
		if len(attrs) == 0 {
			t.Errorf("GET %s: no attributes, want verb get (pkg/kubelet/server/auth.go:86-97, 117-133, v1.36.3)", path)
		}
		for _, a := range attrs {
			if a.GetVerb() != "get" {
				t.Errorf("GET %s: verb %q, want \"get\": only the stream paths (isStreamPath: /exec and under it, not /execute) need create; reading stays get (pkg/kubelet/server/auth.go:86-97, v1.36.3)", path, a.GetVerb())
			}
		}
	}
}

// Every question is about the resource nodes/NAME, for the user, with the
// path (auth.go:137-148).
func TestNodeRequestAttributesAreAboutTheNode(t *testing.T) {
	for _, path := range []string{"/pods", "/exec/default/web/app", "/stats/summary"} {
		attrs := nodeRequestAttributes(authzNode, apiserverUser, request(http.MethodGet, path))
		if len(attrs) == 0 {
			t.Errorf("GET %s: no attributes: every request asks at least one question (pkg/kubelet/server/auth.go:117-133, v1.36.3); with none the filter answers 403 \"could not determine attributes\"", path)
		}
		for _, a := range attrs {
			what := fmt.Sprintf("GET %s, subresource %q", path, a.GetSubresource())
			check := func(field string, got, want any) {
				if got != want {
					t.Errorf("%s: %s %#v, want %#v: the kubelet asks about the node object — resource nodes, name = the node's name, API version v1, no group, no namespace, a resource request, the request's user and path (pkg/kubelet/server/auth.go:137-148, v1.36.3)", what, field, got, want)
				}
			}
			check("resource", a.GetResource(), "nodes")
			check("name", a.GetName(), authzNode)
			check("API version", a.GetAPIVersion(), "v1")
			check("API group", a.GetAPIGroup(), "")
			check("namespace", a.GetNamespace(), "")
			check("ResourceRequest", a.IsResourceRequest(), true)
			check("path", a.GetPath(), path)
			if a.GetUser() == nil || a.GetUser().GetName() != apiserverUser.Name {
				t.Errorf("%s: user %v, want %s: the question is whether the caller may (pkg/kubelet/server/auth.go:138, v1.36.3)", what, a.GetUser(), apiserverUser.Name)
			}
		}
	}
}

// Outside the stream paths, ours is upstream's NewNodeAuthorizerAttributesGetter
// exactly: it is the contract RBAC roles are written against.
func TestNodeRequestAttributesMatchUpstream(t *testing.T) {
	upstream := kubeletserver.NewNodeAuthorizerAttributesGetter(types.NodeName(authzNode))
	paths := []string{"/", "/pods", "/pods/", "/runningpods/", "/runningpods", "/healthz", "/healthz/ping", "/configz", "/stats/", "/stats/summary",
		"/metrics", "/metrics/probes", "/logs/", "/logs/kern.log", "/checkpoint/ns/p/c", "/statusz", "/flagz", "/containerLogs/ns/p/c",
		"/debug/pprof/", "/podsx", "/logsx", "/execute"}
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead} {
		for _, path := range paths {
			r := request(method, path)
			want := describeAttrs(upstream.GetRequestAttributes(r.Context(), apiserverUser, r))
			got := describeAttrs(nodeRequestAttributes(authzNode, apiserverUser, r))
			if got != want {
				t.Errorf("%s %s: the node would ask\n  %s\nwhere upstream's GetRequestAttributes asks\n  %s\n(pkg/kubelet/server/auth.go:83-155, v1.36.3)", method, path, got, want)
			}
		}
	}
}

// describeAttrs says what each question asks, by its getters (what the
// authorizer reads), one per line.
func describeAttrs(attrs []authorizer.Attributes) string {
	if len(attrs) == 0 {
		return "(nothing)"
	}
	var out []string
	for _, a := range attrs {
		who := "<no user>"
		if a.GetUser() != nil {
			who = a.GetUser().GetName()
		}
		out = append(out, fmt.Sprintf("verb=%q resource=%q subresource=%q name=%q apiGroup=%q apiVersion=%q namespace=%q resourceRequest=%v path=%q user=%s",
			a.GetVerb(), a.GetResource(), a.GetSubresource(), a.GetName(), a.GetAPIGroup(), a.GetAPIVersion(), a.GetNamespace(), a.IsResourceRequest(), a.GetPath(), who))
	}
	return strings.Join(out, "\n  ")
}

// sarServer is an apiserver that only answers SubjectAccessReviews, from a
// list of allowed "verb resource/subresource", and remembers every review
// it was sent: what the node asks, as it goes on the wire. It is an
// in-process HTTPS server on loopback, closed when the test ends (the
// webhook authorizer posts through the clientset's REST client, which a
// fake clientset does not have).
type sarServer struct {
	mu      sync.Mutex
	allowed map[string]bool
	asked   []authorizationv1.SubjectAccessReviewSpec
}

func (s *sarServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/apis/authorization.k8s.io/v1/subjectaccessreviews" {
		http.Error(w, "only SubjectAccessReviews here", http.StatusNotFound)
		return
	}
	sar := &authorizationv1.SubjectAccessReview{}
	if err := json.NewDecoder(r.Body).Decode(sar); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.asked = append(s.asked, sar.Spec)
	if ra := sar.Spec.ResourceAttributes; ra != nil {
		sar.Status.Allowed = s.allowed[ra.Verb+" "+ra.Resource+"/"+ra.Subresource]
	}
	s.mu.Unlock()
	sar.APIVersion, sar.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(sar)
}

// serveAs runs one request through the node server's filter, the caller
// already authenticated as u, against an apiserver that allows what
// allowed lists; it returns the response and the reviews the node sent.
func serveAs(t *testing.T, u user.Info, allowed []string, method, path string) (*httptest.ResponseRecorder, []authorizationv1.SubjectAccessReviewSpec) {
	t.Helper()
	api := &sarServer{allowed: map[string]bool{}}
	for _, a := range allowed {
		api.allowed[a] = true
	}
	srv := httptest.NewTLSServer(api)
	defer srv.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{
		CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := newAuth(Config{NodeName: authzNode, Client: client}, x509.NewCertPool())
	if err != nil {
		t.Fatal(err)
	}
	// The TLS layer and the x509 authenticator are tested elsewhere
	// (server_test.go); here the caller is who it says.
	a.authn = authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) {
		return &authenticator.Response{User: u}, true, nil
	})
	s := &Server{auth: a, logf: func(string, ...any) {}}
	w := httptest.NewRecorder()
	s.filter(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "served") })).ServeHTTP(w, request(method, path))
	api.mu.Lock()
	defer api.mu.Unlock()
	return w, api.asked
}

// The SubjectAccessReviews the node sends, and what the caller gets: the
// first allowed question lets the request through (server.go:390-405).
func TestSubjectAccessReviewAsked(t *testing.T) {
	resource := func(verb, sub string) authorizationv1.SubjectAccessReviewSpec {
		return authorizationv1.SubjectAccessReviewSpec{
			User: apiserverUser.Name, Groups: apiserverUser.Groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Version: "v1", Resource: "nodes", Subresource: sub, Name: authzNode},
		}
	}
	for _, tc := range []struct {
		name, method, path string
		allowed            []string
		wantAsked          []authorizationv1.SubjectAccessReviewSpec
		wantCode           int
		wantBody           string
		why                string
	}{
		{"kubectl exec over a WebSocket", http.MethodGet, "/exec/default/web/app?command=sh", []string{"create nodes/proxy"},
			[]authorizationv1.SubjectAccessReviewSpec{resource("create", "proxy")}, http.StatusOK, "served",
			"exec is create nodes/proxy on the node, asked for the apiserver's client user and groups (k8s.io/apiserver plugin/pkg/authorizer/webhook/webhook.go:189-206 turns the attributes into the review; pkg/kubelet/server/auth.go:137-148, v1.36.3)"},
		{"get nodes/proxy may not exec", http.MethodGet, "/exec/default/web/app?command=sh", []string{"get nodes/proxy"},
			[]authorizationv1.SubjectAccessReviewSpec{resource("create", "proxy")}, http.StatusForbidden, "Forbidden (user=kube-apiserver-kubelet-client, verb=create, resource=nodes, subresource(s)=[proxy])",
			"a stream path needs create whatever the method (streamPaths); refused with the kubelet's message (pkg/kubelet/server/server.go:415, v1.36.3)"},
		{"GET /pods with nodes/pods", http.MethodGet, "/pods", []string{"get nodes/pods"},
			[]authorizationv1.SubjectAccessReviewSpec{resource("get", "pods")}, http.StatusOK, "served",
			"nodes/pods is asked first and is enough (pkg/kubelet/server/auth.go:104-105; server.go:401-404, v1.36.3)"},
		{"GET /pods with nodes/proxy only", http.MethodGet, "/pods", []string{"get nodes/proxy"},
			[]authorizationv1.SubjectAccessReviewSpec{resource("get", "pods"), resource("get", "proxy")}, http.StatusOK, "served",
			"denied nodes/pods, the node asks again for nodes/proxy, which allows (pkg/kubelet/server/auth.go:102-133; server.go:390-404, v1.36.3)"},
		{"GET /pods with nothing", http.MethodGet, "/pods", nil,
			[]authorizationv1.SubjectAccessReviewSpec{resource("get", "pods"), resource("get", "proxy")}, http.StatusForbidden, "Forbidden (user=kube-apiserver-kubelet-client, verb=get, resource=nodes, subresource(s)=[pods proxy])",
			"both questions denied: 403 naming both subresources (pkg/kubelet/server/server.go:415, v1.36.3)"},
		{"container logs", http.MethodGet, "/containerLogs/default/web/app", []string{"get nodes/proxy"},
			[]authorizationv1.SubjectAccessReviewSpec{resource("get", "proxy")}, http.StatusOK, "served",
			"kubectl logs is get nodes/proxy (pkg/kubelet/server/auth.go:131-132, v1.36.3)"},
		{"stats", http.MethodGet, "/stats/summary", []string{"get nodes/proxy"},
			[]authorizationv1.SubjectAccessReviewSpec{resource("get", "stats")}, http.StatusForbidden, "subresource(s)=[stats]",
			"/stats/ is nodes/stats only: nodes/proxy does not open it (pkg/kubelet/server/auth.go:118-119, v1.36.3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, asked := serveAs(t, apiserverUser, tc.allowed, tc.method, tc.path)
			if !reflect.DeepEqual(asked, tc.wantAsked) {
				t.Errorf("%s %s: the node sent the SubjectAccessReviews\n  %s\nwant\n  %s\n%s", tc.method, tc.path, specs(asked), specs(tc.wantAsked), tc.why)
			}
			if w.Code != tc.wantCode || !strings.Contains(w.Body.String(), tc.wantBody) {
				t.Errorf("%s %s allowing %v: %d %q, want %d %q: %s", tc.method, tc.path, tc.allowed, w.Code, strings.TrimSpace(w.Body.String()), tc.wantCode, tc.wantBody, tc.why)
			}
		})
	}
}

func specs(list []authorizationv1.SubjectAccessReviewSpec) string {
	if len(list) == 0 {
		return "(none)"
	}
	var out []string
	for _, s := range list {
		if ra := s.ResourceAttributes; ra != nil {
			out = append(out, fmt.Sprintf("user=%s groups=%v resourceAttributes{verb=%q group=%q version=%q resource=%q subresource=%q name=%q namespace=%q}",
				s.User, s.Groups, ra.Verb, ra.Group, ra.Version, ra.Resource, ra.Subresource, ra.Name, ra.Namespace))
		} else if s.NonResourceAttributes != nil {
			out = append(out, fmt.Sprintf("user=%s nonResourceAttributes{verb=%q path=%q} (the attributes say ResourceRequest=false)", s.User, s.NonResourceAttributes.Verb, s.NonResourceAttributes.Path))
		}
	}
	return strings.Join(out, "\n  ")
}
