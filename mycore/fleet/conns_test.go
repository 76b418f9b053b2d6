package fleet

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// TestNodesShareAConnectionPerGroup: with NodesPerConnection 2, five
// nodes make three groups, and the apiserver sees two HTTP/2 connections
// per group: a group's pod requests and heartbeats share one, its pod
// watches have the other, another group's requests come on others, and
// the informers have their own.
func TestNodesShareAConnectionPerGroup(t *testing.T) {
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			t.Errorf("%s %s over %s, want HTTP/2", r.Method, r.URL.Path, r.Proto)
		}
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`, http.StatusNotFound)
	}))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			conns[c] = true
			mu.Unlock()
		}
	}
	srv.StartTLS()
	defer srv.Close()
	newConns := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := len(conns)
		clear(conns)
		return n
	}

	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{
		CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}}
	f, err := New(Options{Config: cfg, Nodes: 5, Dir: t.TempDir(), NodesPerConnection: 2, SharedIdentity: true})
	if err != nil {
		t.Fatal(err)
	}
	groups, watcher, err := f.clients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 3 || f.Groups() != 3 {
		t.Fatalf("5 nodes, 2 per connection: %d groups (Groups says %d), want 3", len(groups), f.Groups())
	}
	ctx := context.Background()
	get := func(what string, do func() error) {
		if err := do(); err == nil {
			t.Fatalf("%s: no error, want the server's 404", what)
		}
	}
	for i, g := range groups {
		get("a pod", func() error { _, err := g.client.CoreV1().Pods("x").Get(ctx, "p", metav1.GetOptions{}); return err })
		get("a Lease", func() error {
			_, err := g.heartbeat.CoordinationV1().Leases("kube-node-lease").Get(ctx, "n", metav1.GetOptions{})
			return err
		})
		reporter, err := g.heartbeat.forNode("n")
		if err != nil {
			t.Fatal(err)
		}
		get("a node", func() error { _, err := reporter.CoreV1().Nodes().Get(ctx, "n", metav1.GetOptions{}); return err })
		if n := newConns(); n != 1 {
			t.Errorf("group %d: its pod, Lease and node requests came on %d new connections, want 1", i, n)
		}
		for range 2 {
			get("a node's pods", func() error {
				_, err := g.watches.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n"})
				return err
			})
		}
		if n := newConns(); n != 1 {
			t.Errorf("group %d: its pod watches' lists came on %d new connections, want 1 of their own", i, n)
		}
	}
	get("a list", func() error { _, err := watcher.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); return err })
	if n := newConns(); n != 1 {
		t.Errorf("the informers' list came on %d new connections, want 1 of its own", n)
	}
}
