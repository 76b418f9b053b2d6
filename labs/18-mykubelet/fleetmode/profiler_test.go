package fleetmode

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/testenv"
)

// TestProfilerURLIsPrinted: --pprof-addr prints the one URL that opens
// the profiler, a secret in its path, and the go tool pprof command.
func TestProfilerURLIsPrinted(t *testing.T) {
	t.Setenv("LABS_STATE_DIR", t.TempDir())
	o := Options{Kubeconfig: filepath.Join(t.TempDir(), "nope.kubeconfig"), Nodes: 1, prefix: "t18", qps: -1, burst: 1,
		RelistPeriod: time.Second, leaseSeconds: 40, statusEvery: 10 * time.Second, memoryLimit: "none", pprofAddr: "127.0.0.1:0"}
	out := &testenv.SyncBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = Run(ctx, o, labenv.NewPrinter(out), nil) // no cluster: it stops after the profiler started
	re := regexp.MustCompile(`profiler on (http://127\.0\.0\.1:\d+/[A-Za-z0-9_-]{32}/debug/pprof/) \(go tool pprof (\S+)heap; the path is its password\)`)
	if m := re.FindStringSubmatch(out.String()); m == nil || m[1] != m[2] {
		t.Errorf("want the profiler's URL with a secret path and the go tool pprof command, got:\n%s", out)
	}
}

// TestProfilerNeedsItsSecretAndItsHost: the profiler answers only the URL
// it printed — its secret path and this server's name in the Host header.
// A local user without the secret, or a web page that made its own name
// resolve to 127.0.0.1 (DNS rebinding), is refused; the requests
// `go tool pprof URL` makes (the profile, then path/../symbol) work.
func TestProfilerNeedsItsSecretAndItsHost(t *testing.T) {
	printed, stop, err := serveProfiler("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	u, err := url.Parse(printed)
	if err != nil {
		t.Fatal(err)
	}
	base, port := "http://"+u.Host, u.Port()
	secret := strings.Split(u.Path, "/")[1]
	if len(secret) != 32 || u.Path != "/"+secret+"/debug/pprof/" {
		t.Errorf("URL %s: want /SECRET/debug/pprof/ with a 32-character secret", printed)
	}
	for _, c := range []struct {
		what, url, host string
		want            int
		body            string
	}{
		{"the printed URL", printed, "", http.StatusOK, "heap"},
		{"a heap profile (gzip)", printed + "heap", "", http.StatusOK, "\x1f\x8b"},
		{"the symbol table, where go tool pprof asks (heap/../symbol)", printed + "symbol", "", http.StatusOK, "num_symbols"},
		{"as localhost", printed + "heap", "localhost:" + port, http.StatusOK, "\x1f\x8b"},
		{"as [::1]", printed + "heap", "[::1]:" + port, http.StatusOK, "\x1f\x8b"},
		{"without the secret", base + "/debug/pprof/heap", "", http.StatusForbidden, "the URL the fleet printed"},
		{"with a wrong secret", base + "/" + strings.Repeat("A", 32) + "/debug/pprof/heap", "", http.StatusForbidden, "the URL the fleet printed"},
		{"with more than the secret", base + "/" + secret + "x/debug/pprof/heap", "", http.StatusForbidden, "the URL the fleet printed"},
		{"from a foreign Host, with the secret", printed + "heap", "evil.example:" + port, http.StatusMisdirectedRequest, "unknown Host"},
		{"from a foreign Host, without it", base + "/debug/pprof/heap", "evil.example:" + port, http.StatusMisdirectedRequest, "unknown Host"},
		{"naming another port", printed + "heap", "127.0.0.1:1", http.StatusMisdirectedRequest, "unknown Host"},
	} {
		req, _ := http.NewRequest("GET", c.url, nil)
		if c.host != "" {
			req.Host = c.host
		}
		client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want || !strings.Contains(string(body), c.body) {
			t.Errorf("%s: %d %.80q, want %d with %q", c.what, resp.StatusCode, body, c.want, c.body)
		}
	}
}
