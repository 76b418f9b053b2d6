package virtualnode

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestInterpreter: the exit codes, by the kind of failure, without a cluster.
func TestInterpreter(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "hello")
	}))
	defer srv.Close()
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer tlsSrv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/"
	ln.Close()

	in := &Interpreter{client: &http.Client{}, logf: func(string, ...any) {}}
	in.client.Transport = &http.Transport{DisableKeepAlives: true}
	for _, tc := range []struct {
		argv []string
		code int
		msg  string
	}{
		{[]string{"http-get", srv.URL}, ExitOK, "200 OK: hello"},
		{[]string{"http-get", srv.URL + "/missing"}, ExitHTTPError, "404 Not Found"},
		{[]string{"http-get", closed}, ExitConnect, "connection refused"},
		{[]string{"http-get", "--retry-for=300ms", "--every=100ms", closed}, ExitConnect, "attempts"},
		{[]string{"http-get", tlsSrv.URL}, ExitTLS, "certificate"},
		{[]string{"http-get", "http://no-such-host.invalid/"}, ExitResolve, "no-such-host.invalid"},
		{[]string{"wget", srv.URL}, ExitNotFound, "wget: command not found"},
		{nil, ExitNotFound, "no command"},
		{[]string{"http-get"}, ExitUsage, "want exactly one URL"},
		{[]string{"http-get", "--every=0s", srv.URL}, ExitUsage, "--every"},
		{[]string{"http-get", "--bogus", srv.URL}, ExitUsage, "flag provided but not defined"},
		{[]string{"http-get", "ftp://x/"}, ExitUsage, "not an http(s) URL"},
	} {
		r := in.Run(context.Background(), "test", tc.argv)
		if r.ExitCode != tc.code || !strings.Contains(r.Message, tc.msg) {
			t.Errorf("%q: exit %d %q; want %d and %q", tc.argv, r.ExitCode, r.Message, tc.code, tc.msg)
		}
	}

	// Cancelled while it waits between attempts: stops at once with 143.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	r := in.Run(ctx, "test", []string{"http-get", "--retry-for=1m", "--every=100ms", closed})
	if r.ExitCode != ExitStopped || time.Since(start) > 5*time.Second {
		t.Errorf("cancelled: exit %d %q after %s", r.ExitCode, r.Message, time.Since(start))
	}
}
