package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelet-labs/internal/browsertest"
	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/journal"
)

// TestLiveViewInABrowser opens the live view lab 18 prints in headless
// Chromium and watches a pod's life there, as a learner would: the web pod
// (web-mock.yaml, on the mock runtime) gets its lane with the sandbox, the
// container's start, its readiness probe and a Running, ready status;
// deleted, it goes terminating → terminated → finished on the state
// machine; the crash pod shows its back-off counting down. The session
// saved as a Chrome trace loads back into the page. The token stays with
// the view: another port of 127.0.0.1 the browser visits gets nothing
// that opens it (anotherPortGetsNoToken). Any JavaScript error
// fails the test; the screenshots go to browsertest.OutputDir.
func TestLiveViewInABrowser(t *testing.T) {
	testenv.NoLeaks(t)
	cp := testenv.ControlPlane(t)
	dir := t.TempDir()
	t.Setenv(state.EnvVar, dir)
	const node = "t18-view"
	o := options{kubeconfig: cp.AdminKubeconfig(), nodeName: node,
		runtime: labruntime.Flags{Kind: labruntime.Mock, PodLogsDir: filepath.Join(dir, "pod-logs")},
		address: "127.0.0.1", port: 0, relist: time.Second, backOffInit: 2 * time.Second, backOffMax: 8 * time.Second,
		shutdownGrace: 10 * time.Second, timeout: time.Minute, view: DefaultView}
	lab := testenv.StartLab(t, func(ctx context.Context, out io.Writer, onReady func(*nodeLab)) error {
		return run(ctx, o, labenv.NewPrinter(out), onReady)
	})
	url := lab.L.node.View.URL()
	if !regexp.MustCompile(`^http://127\.0\.0\.1:\d+/\?token=[A-Za-z0-9_-]{32}$`).MatchString(url) {
		t.Fatalf("the view's URL %q is not a loopback URL with a token", url)
	}
	if !strings.Contains(lab.Out.String(), "view      "+url) {
		t.Errorf("the lab did not print the view's URL %s", url)
	}

	page := browsertest.Open(t, url)
	lanes := `[...document.querySelectorAll('.lane')].map(l => l.dataset.pod + ': ' + l.querySelector('.name small').textContent + ' | ' + [...l.querySelectorAll('.chip')].map(c => c.textContent).join(' · ')).join('\n') + '\nconn: ' + document.getElementById('conn').textContent`
	page.WaitFor(t, "that it is live", `document.getElementById('conn').textContent === 'live'`, lanes, 30*time.Second)
	base, token, _ := strings.Cut(url, "/?token=")
	if at := page.Text(t, `location.href`); at != base+"/" {
		t.Errorf("the address bar shows %s, want %s/ (the token out of sight)", at, base)
	}
	anotherPortGetsNoToken(t, page, base, token)
	page.WaitFor(t, "that it is live again, back from another page", `document.getElementById('conn').textContent === 'live'`, lanes, 30*time.Second)

	// A pod: its lane shows each step of its start.
	c := testenv.AdminClient(t)
	ns := testenv.Namespace(t, c, "lab18-view")
	create(t, c, manifest(t, "web-mock.yaml", ns, node))
	web, crash := ns+"/web", ns+"/crash"
	// chips is a lane's chips of one kind; some(...) holds if one of them
	// passes the JavaScript test cond (on c, the chip).
	some := func(pod, kind, cond string) string {
		return fmt.Sprintf(`[...document.querySelectorAll('.lane[data-pod=%q] .chip[data-kind=%q]')].some(c => %s)`, pod, kind, cond)
	}
	call := func(name string) string { return fmt.Sprintf("c.dataset.call === %q", name) }
	inState := func(state, pod string) string {
		return fmt.Sprintf(`[...document.querySelectorAll('#state-%s li')].some(li => li.textContent === %q)`, state, pod)
	}
	for _, step := range []struct{ what, expr string }{
		{"the config ADD", some(web, "config", call("ADD"))},
		{"computePodActions", some(web, "decision", "true")},
		{"the sandbox (RunPodSandbox)", some(web, "cri", call("RunPodSandbox"))},
		{"the container's start", some(web, "cri", call("StartContainer"))},
		{"a PLEG event", some(web, "pleg", call("ContainerStarted"))},
		{"the readiness probe's success", some(web, "probe", "c.textContent.startsWith('readiness Success')")},
		{"a status post of Running and ready", some(web, "status", "c.textContent.includes('Running') && c.title.includes('ready')")},
		{"the pod in the sync state", inState("sync", web)},
		{"a relist on the PLEG chart", `document.getElementById('pleg-line').getAttribute('points').split(' ').length >= 2`},
		// The calls about no pod: the relists' own lists have no lane.
		{"the node's CRI calls, the relists' lists among them", `/^CRI calls: \d+.* — .*ListPodSandbox \d+/.test(document.getElementById('cri-calls').textContent)`},
	} {
		page.WaitFor(t, step.what, step.expr, lanes, time.Minute)
	}
	waitPod(t, c, ns, "web", "Ready", ready)
	if h := page.Text(t, `document.getElementById('pleg-health').textContent`); !regexp.MustCompile(`^healthy: last relist [0-9.]+ s ago, threshold 180 s$`).MatchString(h) {
		t.Errorf("the PLEG gauge says %q, want healthy with the kubelet's 3 min threshold", h)
	}
	page.Screenshot(t, "18-live-view-web")

	// The crash loop: a back-off counting down on its lane.
	create(t, c, manifest(t, "crash.yaml", ns, node))
	page.WaitFor(t, "the crash pod's back-off", some(crash, "backoff", "true"), lanes, time.Minute)
	page.WaitFor(t, "the back-off counting down", fmt.Sprintf(`[...document.querySelectorAll('.lane[data-pod=%q] .countdown')].some(c => /^back-off app: \d+ s$/.test(c.textContent))`, crash), lanes, 30*time.Second)
	page.Screenshot(t, "18-live-view-crashloop")

	// Follow one pod: the other lanes hide; every pod again: they come back.
	follow := func(pod string) string {
		return page.Text(t, fmt.Sprintf(`(() => { const f = document.getElementById('follow'); f.value = %q; f.dispatchEvent(new Event('change')); return [...document.querySelectorAll('.lane:not(.hidden)')].map(l => l.dataset.pod).sort().join(','); })()`, pod))
	}
	if shown := follow(crash); shown != crash {
		t.Errorf("following %s shows the lanes %q", crash, shown)
	}
	if shown := follow(""); shown != crash+","+web {
		t.Errorf("following every pod shows the lanes %q", shown)
	}
	// Pause: steps are held, not drawn, until Resume (the crash loop goes on).
	page.Text(t, `(() => { document.getElementById('pause').click(); return ''; })()`)
	page.WaitFor(t, "steps held while paused", `/held while paused/.test(document.getElementById('counts').textContent) && document.getElementById('conn').textContent === 'paused'`, lanes, time.Minute)
	page.Text(t, `(() => { document.getElementById('pause').click(); return ''; })()`)
	page.WaitFor(t, "the held steps drawn after Resume", `!/held/.test(document.getElementById('counts').textContent) && document.getElementById('conn').textContent === 'live'`, lanes, 10*time.Second)

	// Deleted: terminating, then terminated, then finished.
	if err := c.CoreV1().Pods(ns).Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	page.WaitFor(t, "web terminating", some(web, "worker", "c.textContent.startsWith('→ terminating')"), lanes, time.Minute)
	page.WaitFor(t, "web terminated", some(web, "worker", "c.textContent.startsWith('→ terminated')"), lanes, time.Minute)
	page.WaitFor(t, "web finished on the state machine", inState("finished", web), lanes, time.Minute)

	// Save the session (the page's Save link) and load it back.
	trace := download(t, page.Text(t, `document.getElementById('save').href`))
	entries, err := journal.ReadChromeTrace(trace)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 20 {
		t.Errorf("the saved session has %d steps", len(entries))
	}
	file := filepath.Join(t.TempDir(), "session.json")
	if err := os.WriteFile(file, trace, 0o644); err != nil {
		t.Fatal(err)
	}
	page.Do(t, browsertest.Upload("#load", file))
	page.WaitFor(t, "the saved session loaded", `document.getElementById('conn').textContent.startsWith('from session.json')`, lanes, 30*time.Second)
	page.WaitFor(t, "web's lane from the file", some(web, "cri", call("RunPodSandbox")), lanes, 10*time.Second)
	page.NoErrors(t)
}

// download GETs the page's Save link, as the learner's click does.
func download(t *testing.T, link string) []byte {
	t.Helper()
	hc := &http.Client{Timeout: 30 * time.Second}
	resp, err := hc.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v\n%s", link, resp.Status, err, data)
	}
	return data
}

// anotherPortGetsNoToken: the browser that shows the view visits another
// server on 127.0.0.1 — any process of any user may listen there, and a
// browser sends it every cookie of 127.0.0.1, whatever their port. That
// server replays what it received to the view and is refused. Then the
// browser goes back to the view (its address no longer has the token).
func anotherPortGetsNoToken(t *testing.T, page *browsertest.Page, view, token string) {
	t.Helper()
	var mu sync.Mutex
	var got http.Header
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if got == nil {
			got = r.Header.Clone()
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, `<!doctype html><title>another server</title><link rel="icon" href="data:,">`)
	}))
	defer other.Close()
	page.Do(t, chromedp.Navigate(other.URL+"/"))
	mu.Lock()
	defer mu.Unlock()
	if got == nil {
		t.Fatal("the other server got no request from the browser")
	}
	for name, values := range got {
		if strings.Contains(strings.Join(values, " "), token) {
			t.Errorf("the browser sent the view's token to another port of 127.0.0.1 (%s: %s)", name, values)
		}
	}
	req, _ := http.NewRequest("GET", view+"/trace.json", nil)
	req.Header.Set("Cookie", got.Get("Cookie"))
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the view's download with the cookies another port received (%q): %s, want 401", got.Get("Cookie"), resp.Status)
	}
	page.Do(t, chromedp.NavigateBack())
}
