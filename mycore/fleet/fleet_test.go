package fleet

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestImpersonateNodes: a request made for a node carries that node's
// identity; a read made without (the shared informers) carries none; a
// write made without is refused before it is sent. What is sent is
// counted by verb, resource and code; what is refused is not.
func TestImpersonateNodes(t *testing.T) {
	type seen struct {
		path   string
		user   string
		groups []string
	}
	got := make(chan seen, 3)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.URL.Path, r.Header.Get("Impersonate-User"), r.Header.Values("Impersonate-Group")}
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`, http.StatusNotFound)
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	calls := NewCalls()
	calls.Wrap(cfg)
	impersonateNodes(cfg)
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.CoreV1().Pods("ns").Delete(asNode(context.Background(), "n-0001"), "p", metav1.DeleteOptions{})
	s := <-got
	if s.user != "system:node:n-0001" || strings.Join(s.groups, ",") != "system:nodes" {
		t.Errorf("as node: user %q groups %v, want system:node:n-0001 in system:nodes (the apiserver adds system:authenticated)", s.user, s.groups)
	}
	_, _ = c.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	s = <-got
	if s.user != "" || len(s.groups) != 0 {
		t.Errorf("a read without a node: user %q groups %v, want no impersonation", s.user, s.groups)
	}
	err = c.CoreV1().Pods("ns").Delete(context.Background(), "p", metav1.DeleteOptions{})
	if !errors.Is(err, ErrNoNode) {
		t.Errorf("a write without a node: got %v, want ErrNoNode", err)
	}
	select {
	case s := <-got:
		t.Errorf("a write without a node reached the server: %+v", s)
	default:
	}
	counts := calls.Counts()
	if len(counts) != 2 || counts[0].Call != (Call{"DELETE", "pods", 404}) || counts[1].Call != (Call{"LIST", "pods", 404}) {
		t.Errorf("counts %v, want the node's DELETE and the LIST (the refused write was never sent)", counts)
	}
	if w := WastedOf(counts); w.DeletesOfGone != 1 || w.Conflicts != 0 {
		t.Errorf("wasted %+v, want the one delete of a gone pod", w)
	}
}

// TestHeartbeatForNode: a node's status reporter acts as the node even
// through a library call that passes no context (nodeutil.PatchNodeStatus
// uses context.TODO()); with the shared identity it acts as the
// credential's user.
func TestHeartbeatForNode(t *testing.T) {
	users := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		users <- r.Header.Get("Impersonate-User")
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`, http.StatusNotFound)
	}))
	defer srv.Close()
	for _, c := range []struct {
		impersonate bool
		want        string
	}{{true, "system:node:n-0007"}, {false, ""}} {
		cfg := &rest.Config{Host: srv.URL}
		if c.impersonate {
			impersonateNodes(cfg)
		}
		rt, err := rest.TransportFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		hb, err := newHeartbeatClient(cfg, &http.Client{Transport: rt}, c.impersonate)
		if err != nil {
			t.Fatal(err)
		}
		nc, err := hb.forNode("n-0007")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = nc.CoreV1().Nodes().Patch(context.TODO(), "n-0007", types.StrategicMergePatchType, []byte("{}"), metav1.PatchOptions{}, "status")
		if got := <-users; got != c.want {
			t.Errorf("impersonate %v: the status patch went as %q, want %q", c.impersonate, got, c.want)
		}
	}
}

// TestCallsNoAnswer: a request that gets no answer is counted with code
// 0 when it timed out, -1 when its caller cancelled it (a node stopping).
func TestCallsNoAnswer(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	cfg := &rest.Config{Host: srv.URL}
	calls := NewCalls()
	calls.Wrap(cfg)
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	timeout, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, _ = c.CoreV1().Pods("ns").Get(timeout, "p", metav1.GetOptions{})
	cancelled, cancelNow := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancelNow)
	_, _ = c.CoreV1().Pods("ns").Get(cancelled, "p", metav1.GetOptions{})
	counts := calls.Counts()
	if len(counts) != 2 || counts[0].Call != (Call{"GET", "pods", -1}) || counts[1].Call != (Call{"GET", "pods", 0}) {
		t.Errorf("counts %v, want one GET pods with code -1 (cancelled) and one with 0 (timed out)", counts)
	}
}

// TestClassify names requests as apiserver_request_total does.
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		method, path string
		watch        bool
		verb, res    string
	}{
		{"GET", "/api/v1/namespaces/ns/pods/p", false, "GET", "pods"},
		{"GET", "/api/v1/pods", false, "LIST", "pods"},
		{"GET", "/api/v1/pods", true, "WATCH", "pods"},
		{"PATCH", "/api/v1/namespaces/ns/pods/p/status", false, "PATCH", "pods/status"},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n", false, "PUT", "leases"},
		{"POST", "/api/v1/nodes", false, "POST", "nodes"},
		{"PATCH", "/api/v1/nodes/n/status", false, "PATCH", "nodes/status"},
		{"DELETE", "/api/v1/namespaces/ns/pods", false, "DELETECOLLECTION", "pods"},
		{"GET", "/api/v1/namespaces/ns", false, "GET", "namespaces"},
		{"GET", "/metrics", false, "GET", "/metrics"},
	} {
		verb, res := Classify(c.method, c.path, c.watch)
		if verb != c.verb || res != c.res {
			t.Errorf("%s %s: got %s %s, want %s %s", c.method, c.path, verb, res, c.verb, c.res)
		}
	}
}

// TestNewRefuses: bad options fail before anything runs.
func TestNewRefuses(t *testing.T) {
	good := Options{Config: &rest.Config{Host: "https://127.0.0.1:1"}, Nodes: 1, Dir: t.TempDir()}
	for _, c := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"no config", func(o *Options) { o.Config = nil }, "Config is required"},
		{"no nodes", func(o *Options) { o.Nodes = 0 }, "must be 1 to 10000"},
		{"too many", func(o *Options) { o.Nodes = MaxNodes + 1 }, "must be 1 to 10000"},
		{"no dir", func(o *Options) { o.Dir = "" }, "Dir is required"},
		{"hot lease", func(o *Options) { o.LeaseDurationSeconds = -1 }, "at least 1s"},
	} {
		o := good
		c.edit(&o)
		if _, err := New(o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
	f, err := New(good)
	if err != nil {
		t.Fatal(err)
	}
	if n := f.Names(); len(n) != 1 || n[0] != "mykubelet-0000" {
		t.Errorf("names %v", n)
	}
	if podCIDR(0) != "10.64.0.0/24" || podCIDR(257) != "10.65.1.0/24" || podCIDR(MaxNodes-1) != "10.103.15.0/24" {
		t.Errorf("pod CIDRs %s %s %s", podCIDR(0), podCIDR(257), podCIDR(MaxNodes-1))
	}
}
