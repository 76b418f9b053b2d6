package liveview

import (
	"bufio"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
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

// browser is a client that keeps cookies, as a browser does, and does
// not follow redirects on its own.
func browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, u string, header ...string) (int, string) {
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
	return resp.StatusCode, string(b)
}

func TestOnlyTheTokenOfThePrintedURLOpensThePage(t *testing.T) {
	s := start(t, Options{Journal: journal.New(journal.Options{Node: "n1"})})
	u, _ := url.Parse(s.URL())
	base := u.Scheme + "://" + u.Host
	if u.Scheme != "http" || !strings.HasPrefix(u.Host, "127.0.0.1:") || len(u.Query().Get("token")) != 32 {
		t.Fatalf("URL %s: want http on loopback with a 32-character token", s.URL())
	}
	stranger := browser()
	if code, _ := get(t, stranger, base+"/"); code != http.StatusUnauthorized {
		t.Errorf("without the token: %d, want 401", code)
	}
	if code, _ := get(t, stranger, base+"/events"); code != http.StatusUnauthorized {
		t.Errorf("the event stream without the token: %d, want 401", code)
	}
	if code, _ := get(t, stranger, base+"/?token=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"); code != http.StatusUnauthorized {
		t.Errorf("with a wrong token: %d, want 401", code)
	}
	learner := browser()
	code, _ := get(t, learner, s.URL())
	if code != http.StatusSeeOther {
		t.Fatalf("with the token: %d, want 303 to the page without it", code)
	}
	code, page := get(t, learner, base+"/")
	if code != http.StatusOK || !strings.Contains(page, "live view") {
		t.Errorf("the page after the redirect: %d %.80q", code, page)
	}
	// DNS rebinding: another site's name resolved to 127.0.0.1 carries
	// its own Host, even with the cookie.
	if code, _ := get(t, learner, base+"/", "Host", "evil.example:"+u.Port()); code != http.StatusMisdirectedRequest {
		t.Errorf("a foreign Host: %d, want 421", code)
	}
	if code, _ := get(t, browser(), "http://localhost:"+u.Port()+"/?"+u.RawQuery); code != http.StatusSeeOther {
		t.Errorf("the printed URL with localhost for 127.0.0.1: %d, want 303", code)
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
	c := browser()
	get(t, c, s.URL())
	u, _ := url.Parse(s.URL())
	next, stop := sse(t, c, u.Scheme+"://"+u.Host+"/events")
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
	c := browser()
	get(t, c, s.URL())
	u, _ := url.Parse(s.URL())
	code, body := get(t, c, u.Scheme+"://"+u.Host+"/trace.json")
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
	resp, err := c.Get(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("over TLS with the token: %d, want 303", resp.StatusCode)
	}
	if !strings.Contains(resp.Header.Get("Set-Cookie"), "Secure") || u.Hostname() != ip {
		t.Errorf("over TLS the cookie is not Secure (%q), or the URL's host is not %s", resp.Header.Get("Set-Cookie"), ip)
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
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the printed URL: %d, want 303", resp.StatusCode)
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
