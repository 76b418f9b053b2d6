package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelet-labs/internal/testenv"
	"kubelet-labs/labs/14-exec/visitor"
)

// answer is your prediction (README, Exercise): the visitor bound to
// node-reader (get on nodes/proxy and nodes/pods, nothing else) sends each
// request to our node server. Fill in the HTTP status code each one gets
// (200, 403, 404, 500, …) and, for each 403, the verb the node asked the
// apiserver about ("get" or "create"; "" for the others). A status of 0 is
// not predicted yet.
var answer = map[string]prediction{
	"GET /pods":                         {Status: 0, Verb: ""},
	"GET /containerLogs":                {Status: 0, Verb: ""},
	"GET /exec":                         {Status: 0, Verb: ""},
	"POST /exec":                        {Status: 0, Verb: ""},
	"GET /exec with Upgrade: websocket": {Status: 0, Verb: ""},
}

type prediction struct {
	Status int
	Verb   string
}

// exerciseRequests are the README's five curl commands.
var exerciseRequests = []struct {
	name, method, path string
	websocket          bool
}{
	{"GET /pods", "GET", "/pods", false},
	{"GET /containerLogs", "GET", "/containerLogs/default/shell/shell?tailLines=1", false},
	{"GET /exec", "GET", "/exec/default/shell/shell?command=id&output=1", false},
	{"POST /exec", "POST", "/exec/default/shell/shell?command=id&output=1", false},
	{"GET /exec with Upgrade: websocket", "GET", "/exec/default/shell/shell?command=id&output=1", true},
}

// TestExercise runs the lab's node on the mock CRI with shell.yaml's pod,
// binds the visitor to a node-reader role, sends the README's five
// requests with the visitor's certificate and compares what the node
// answers with your predictions.
func TestExercise(t *testing.T) {
	testenv.Exercise(t)
	// Predict first: what the node answers is printed only to compare
	// with a prediction, never in place of one.
	if blank := unanswered(); len(blank) > 0 {
		t.Fatalf("you have not predicted yet: write %s in answer at the top of labs/14-exec/exercise_test.go (README, Exercise)", strings.Join(blank, ", "))
	}
	cp := testenv.ControlPlane(t)
	admin := testenv.AdminClient(t)
	l := startLab(t, defaults(cp.AdminKubeconfig(), "t14-exercise", "mock"))
	pod := shellPod(t, admin, "t14-exercise", "")
	waitReady(t, admin, pod)
	grantNodeReader(t)

	ca, err := os.ReadFile(l.L.node.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(l.L.visitor.Cert, l.L.visitor.Key)
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("https://127.0.0.1:%d", l.L.node.Server.Port())
	verbOf := regexp.MustCompile(`verb=(\w+)`)
	for _, r := range exerciseRequests {
		status, body, err := visit(ca, cert, r.method, base+r.path, r.websocket)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		got := prediction{Status: status}
		if m := verbOf.FindStringSubmatch(body); status == http.StatusForbidden && m != nil {
			got.Verb = m[1]
		}
		want, ok := answer[r.name]
		switch {
		case !ok:
			t.Errorf("%s: no prediction in answer", r.name)
		case want.Status != got.Status:
			t.Errorf("%s: you predicted %d; the node answered %d: %.120q", r.name, want.Status, got.Status, strings.TrimSpace(body))
		case want.Verb != got.Verb:
			t.Errorf("%s: you predicted a 403 asking about %q; the node asked about %q: %.120q", r.name, want.Verb, got.Verb, strings.TrimSpace(body))
		default:
			t.Logf("%s: %d, as you predicted: %.120q", r.name, got.Status, strings.TrimSpace(body))
		}
	}
}

// unanswered lists the requests of answer not predicted yet (or not
// there), with what each takes.
func unanswered() []string {
	var blank []string
	for _, r := range exerciseRequests {
		p, ok := answer[r.name]
		switch {
		case !ok || p.Status < 100 || p.Status > 599:
			blank = append(blank, fmt.Sprintf("%q's Status (an HTTP status: 200, 403, …)", r.name))
		case p.Verb != "" && p.Verb != "get" && p.Verb != "create":
			blank = append(blank, fmt.Sprintf(`%q's Verb ("get" or "create" for a 403, "" for the others)`, r.name))
		}
	}
	return blank
}

// grantNodeReader is the README's three kubectl commands: the visitor may
// get nodes/proxy and nodes/pods. It returns once the apiserver's RBAC
// says so (a SubjectAccessReview), before the node has cached any answer.
func grantNodeReader(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	admin := testenv.AdminClient(t)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "t14-exercise-node-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Verbs: []string{"get"}, Resources: []string{"nodes/proxy", "nodes/pods"}}}}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "t14-exercise-visitor"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: visitor.User}}}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
	})
	testenv.Poll(t, "RBAC to allow the visitor get nodes/pods", 30*time.Second, func() (bool, error) {
		sar, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: visitor.User, ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Subresource: "pods"}}}, metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed, err
	})
}

// visit is the README's curl with the visitor's certificate; websocket adds
// the headers of a WebSocket handshake, as the last curl does.
func visit(ca []byte, cert tls.Certificate, method, url string, websocket bool) (int, string, error) {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return 0, "", err
	}
	if websocket {
		for k, v := range map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
			"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol": "v5.channel.k8s.io"} {
			req.Header.Set(k, v)
		}
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return resp.StatusCode, "(upgraded: the exec ran)", nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(b), err
}
