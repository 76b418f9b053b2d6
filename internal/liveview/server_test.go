package liveview

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"kubelet-labs/mycore/journal"
)

func start(t *testing.T, o Options) *Server {
	t.Helper()
	if o.Address == "" {
		o.Address = "127.0.0.1:0"
	}
	s, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// browser is a client that keeps cookies, as a browser does — by host,
// whatever the port (RFC 6265 section 8.5; net/http/cookiejar too) — and
// does not follow redirects on its own.
func browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, u string, header ...string) (int, string) {
	t.Helper()
	code, body, _ := getResp(t, c, u, header...)
	return code, body
}

func getResp(t *testing.T, c *http.Client, u string, header ...string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// status is the status code of a GET, read without the body (the event
// stream's does not end).
func status(t *testing.T, c *http.Client, u string, header ...string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// printed splits the printed URL into the server's base URL and its token.
func printed(t *testing.T, s *Server) (base, token string) {
	t.Helper()
	u, err := url.Parse(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	return u.Scheme + "://" + u.Host, u.Query().Get("token")
}

func TestOnlyTheTokenOfThePrintedURLOpensTheNodesData(t *testing.T) {
	s := start(t, Options{Journal: journal.New(journal.Options{Node: "private-node"}), Title: "lab X · node private-node"})
	u, _ := url.Parse(s.URL())
	base, token := printed(t, s)
	if u.Scheme != "http" || !strings.HasPrefix(u.Host, "127.0.0.1:") || len(token) != 32 {
		t.Fatalf("URL %s: want http on loopback with a 32-character token", s.URL())
	}
	stranger := browser()
	// the page is the course's own static files: it shows nothing of the node
	if code, page := get(t, stranger, base+"/"); code != http.StatusOK || strings.Contains(page, "private-node") {
		t.Errorf("the page without the token: %d %.80q, want 200 and nothing of the node", code, page)
	}
	for _, path := range []string{"/events", "/trace.json", "/anything-else"} {
		if code, _ := get(t, stranger, base+path); code != http.StatusUnauthorized {
			t.Errorf("%s without the token: %d, want 401", path, code)
		}
	}
	for _, path := range []string{"/", "/events", "/view.js"} {
		if code, body := get(t, stranger, base+path+"?token=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"); code != http.StatusUnauthorized || !strings.Contains(body, "wrong token") {
			t.Errorf("%s with a wrong token: %d %q, want 401 saying so", path, code, body)
		}
	}
	learner := browser()
	code, page, header := getResp(t, learner, s.URL())
	if code != http.StatusOK || !strings.Contains(page, "live view") {
		t.Errorf("the printed URL: %d %.80q, want the page", code, page)
	}
	if c := header.Values("Set-Cookie"); len(c) != 0 {
		t.Errorf("the view sets cookies %q: a cookie of 127.0.0.1 goes to every port of it", c)
	}
	if code := status(t, learner, base+"/events?token="+token); code != http.StatusOK {
		t.Errorf("the event stream with the token: %d, want 200", code)
	}
	// DNS rebinding: another site's name resolved to 127.0.0.1 carries
	// its own Host, even with the token.
	if code, _ := get(t, learner, s.URL(), "Host", "evil.example:"+u.Port()); code != http.StatusMisdirectedRequest {
		t.Errorf("a foreign Host: %d, want 421", code)
	}
	if code, _ := get(t, browser(), "http://localhost:"+u.Port()+"/?"+u.RawQuery); code != http.StatusOK {
		t.Errorf("the printed URL with localhost for 127.0.0.1: %d, want 200", code)
	}
}

// TestAnotherPortOfThisMachineGetsNothingThatOpensTheView: the learner's
// browser opens the printed URL and uses the view as the page does (its
// stream, its download); then it visits another server on 127.0.0.1 — any
// process of any user may listen there. That server replays everything
// the browser sent it to the view, and is refused: cookies ignore ports,
// so a token kept in a cookie would have gone to it.
func TestAnotherPortOfThisMachineGetsNothingThatOpensTheView(t *testing.T) {
	s := start(t, Options{Journal: journal.New(journal.Options{Node: "n1"})})
	base, token := printed(t, s)
	learner := browser()
	get(t, learner, s.URL())
	for _, path := range []string{"/events", "/trace.json"} {
		if code := status(t, learner, base+path+"?token="+token); code != http.StatusOK {
			t.Errorf("the learner's %s: %d, want 200", path, code)
		}
	}

	var mu sync.Mutex
	var sent *http.Request
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		sent = r.Clone(context.Background())
	}))
	defer other.Close()
	if !strings.HasPrefix(other.URL, "http://127.0.0.1:") {
		t.Fatalf("the other server is at %s, not on 127.0.0.1", other.URL)
	}
	get(t, learner, other.URL+"/")
	mu.Lock()
	defer mu.Unlock()
	if sent == nil {
		t.Fatal("the other server got no request")
	}
	for name, values := range sent.Header {
		if strings.Contains(strings.Join(values, " "), token) {
			t.Errorf("the browser sent the view's token to another port of 127.0.0.1 (%s: %s)", name, values)
		}
	}
	// replay: the cookies as they came, and each value as a token
	for _, path := range []string{"/events", "/trace.json"} {
		if code := status(t, browser(), base+path, "Cookie", sent.Header.Get("Cookie")); code != http.StatusUnauthorized {
			t.Errorf("%s with the cookies another port received (%q): %d, want 401", path, sent.Header.Get("Cookie"), code)
		}
		for _, c := range sent.Cookies() {
			if code := status(t, browser(), base+path+"?token="+url.QueryEscape(c.Value)); code != http.StatusUnauthorized {
				t.Errorf("%s with the value of cookie %s another port received: %d, want 401", path, c.Name, code)
			}
		}
	}
}

// sse reads Server-Sent Events: each call returns the next event's name
// and data.
func sse(t *testing.T, c *http.Client, u string) (next func() (string, string), stop func()) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	r := bufio.NewReader(resp.Body)
	return func() (string, string) {
		var event, data string
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return "", ""
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case strings.HasPrefix(line, "event: "):
				event = line[7:]
			case strings.HasPrefix(line, "data: "):
				data = line[6:]
			case line == "" && event != "":
				return event, data
			}
		}
	}, func() { resp.Body.Close() }
}

func TestTheStreamSendsTheBacklogThenEachEntryThenTheEnd(t *testing.T) {
	j := journal.New(journal.Options{Node: "n1"})
	j.Printf(journal.Other, "before")
	s := start(t, Options{Journal: j, Title: "lab X"})
	base, token := printed(t, s)
	next, stop := sse(t, browser(), base+"/events?token="+token)
	defer stop()
	if ev, data := next(); ev != "hello" || !strings.Contains(data, `"title":"lab X"`) || !strings.Contains(data, `"node":"n1"`) {
		t.Errorf("first event %s %s, want hello with the title and node", ev, data)
	}
	if ev, data := next(); ev != "entry" || !strings.Contains(data, `"text":"before"`) {
		t.Errorf("second event %s %s, want the entry published before the page came", ev, data)
	}
	j.Publish(journal.Entry{Kind: journal.CRI, Pod: "default/web", Call: "RunPodSandbox", Took: 80 * time.Millisecond})
	if ev, data := next(); ev != "entry" || !strings.Contains(data, `"call":"RunPodSandbox"`) || !strings.Contains(data, `"took":80000000`) {
		t.Errorf("live event %s %s, want the CRI call with its latency", ev, data)
	}
	j.Stop()
	if ev, _ := next(); ev != "end" {
		t.Errorf("after the journal stopped: %q, want end", ev)
	}
}

func TestTheSessionDownloadsAsAChromeTrace(t *testing.T) {
	j := journal.New(journal.Options{Node: "n1"})
	j.Say(journal.Entry{Kind: journal.Config, Pod: "default/web", Call: "ADD"}, "config  ADD default/web")
	s := start(t, Options{Journal: j})
	base, token := printed(t, s)
	code, body := get(t, browser(), base+"/trace.json?token="+token)
	if code != http.StatusOK {
		t.Fatalf("trace.json: %d", code)
	}
	entries, err := journal.ReadChromeTrace([]byte(body))
	if err != nil || len(entries) != 1 || entries[0].Text != "config  ADD default/web" {
		t.Errorf("the saved session reads back as %v, %v", entries, err)
	}
}

func TestOffLoopbackItServesTLSWithTheFingerprintItPrints(t *testing.T) {
	ip := firstNonLoopback()
	if ip == "" {
		t.Skip("this machine has no address but loopback")
	}
	s := start(t, Options{Address: net.JoinHostPort(ip, "0"), Journal: journal.New(journal.Options{})})
	if !strings.HasPrefix(s.URL(), "https://") || len(s.Fingerprint()) != 64 {
		t.Fatalf("URL %s fingerprint %q: want https and a SHA-256 fingerprint", s.URL(), s.Fingerprint())
	}
	u, _ := url.Parse(s.URL())
	// the learner's browser is shown the certificate and checks its
	// fingerprint against the printed one; this client trusts exactly it
	if fp := sha256.Sum256(s.Certificate().Raw); fmt.Sprintf("%X", fp) != s.Fingerprint() {
		t.Fatalf("the printed fingerprint %s is not the certificate's", s.Fingerprint())
	}
	c := trustingOnly(s)
	if code, _ := get(t, c, s.URL()); code != http.StatusOK || u.Hostname() != ip {
		t.Errorf("over TLS with the token: %d, want 200; the URL's host is %s, want %s", code, u.Hostname(), ip)
	}
	base, token := printed(t, s)
	if code, _ := get(t, c, base+"/trace.json?token="+token); code != http.StatusOK {
		t.Errorf("the download over TLS with the token: %d, want 200", code)
	}
}

func TestOnEveryAddressTheURLNamesOneTheRoomCanReach(t *testing.T) {
	ip := firstNonLoopback()
	if ip == "" {
		t.Skip("this machine has no address but loopback")
	}
	s := start(t, Options{Address: "0.0.0.0:0", Journal: journal.New(journal.Options{})})
	u, _ := url.Parse(s.URL())
	if u.Scheme != "https" || u.Hostname() != ip {
		t.Fatalf("URL %s: want https on %s", s.URL(), ip)
	}
	c := trustingOnly(s)
	resp, err := c.Get(s.URL())
	if err != nil {
		t.Fatal(err) // the certificate covers the address the URL names
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the printed URL: %d, want 200", resp.StatusCode)
	}
}

func TestBadAddressesAreRefused(t *testing.T) {
	j := journal.New(journal.Options{})
	for _, addr := range []string{"127.0.0.1", "nonsense:port:x", "256.0.0.1:0"} {
		if s, err := Start(Options{Address: addr, Journal: j}); err == nil {
			s.Close()
			t.Errorf("Start(%q) worked", addr)
		}
	}
	if _, err := Start(Options{Address: "127.0.0.1:0"}); err == nil {
		t.Error("a view with no journal started")
	}
}

func firstNonLoopback() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

// trustingOnly is a client that trusts the server's own certificate and
// nothing else (as the learner's browser, once the printed fingerprint
// matched), and shows redirects instead of following them.
func trustingOnly(s *Server) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(s.Certificate())
	return &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}
