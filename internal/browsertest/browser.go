// Package browsertest drives a real browser — Debian's headless Chromium,
// through the DevTools protocol (github.com/chromedp/chromedp) — for the
// tests of pages the course serves (internal/liveview). A page under test
// fails its test on any JavaScript exception, console error or failed
// load, and its screenshots go to OutputDir, where CI keeps test output.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Page is one browser tab.
type Page struct {
	ctx    context.Context
	done   chan struct{} // the console reader ended
	mu     sync.Mutex
	errors []string
}

// Chromium is the browser's path; scripts/build-mermaid-cli.sh installs it
// (Debian's chromium), as .ci/run does.
func Chromium() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no chromium: install Debian's (sudo apt-get install --no-install-recommends chromium)")
}

// Open starts a headless browser and opens url in it. Without a browser
// the test is skipped, except under CI, where it fails.
func Open(t *testing.T, url string) *Page {
	t.Helper()
	path, err := Chromium()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.WindowSize(1400, 1000),
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-dev-shm-usage", true))
	if os.Geteuid() == 0 {
		// Chromium refuses to run as root with its sandbox (CI runs as root).
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancelAlloc)
	p := &Page{ctx: ctx, done: make(chan struct{})}
	// Start the browser, then read its console before the page loads:
	// every exception, console.error and failed load of the page fails the
	// test (Console has the browser log's entries too).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	messages := chromedp.Console(ctx)
	go func() {
		defer close(p.done)
		for m, err := range messages {
			if err != nil {
				return
			}
			switch m.Type {
			case chromedp.ConsoleError, chromedp.ConsoleException:
				p.fail(fmt.Sprintf("%s: %s (%s:%d)", m.Type, m.Text, m.URL, m.Line+1))
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-p.done })
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s in %s: %v", url, path, err)
	}
	return p
}

func (p *Page) fail(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errors = append(p.errors, msg)
}

// Do runs chromedp actions on the page.
func (p *Page) Do(t *testing.T, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

// Text is the value of a JavaScript expression, as a string.
func (p *Page) Text(t *testing.T, expr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return s
}

// WaitFor polls the JavaScript expression until it is true, for what (the
// failure says what the page did not show, and what it did: show).
func (p *Page) WaitFor(t *testing.T, what, expr, show string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			shown, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](show))
			t.Fatalf("the page did not show %s within %s (err %v); it shows:\n%s", what, timeout, err, shown)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Screenshot writes the whole page as OutputDir()/name.png and returns
// the path.
func (p *Page) Screenshot(t *testing.T, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Fatal(err)
	}
	dir := OutputDir(t)
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return path
}

// NoErrors fails the test with every JavaScript exception, console error
// and failed load the page had.
func (p *Page) NoErrors(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.errors {
		t.Errorf("the page had an error: %s", e)
	}
}

// OutputDir is where screenshots go: $LABS_TEST_OUTPUT_DIR, else
// .labs/test-output in the module's root (CI keeps it with the test log).
func OutputDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("LABS_TEST_OUTPUT_DIR")
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, ".labs", "test-output")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if data, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.HasPrefix(string(data), "module kubelet-labs\n") {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod of kubelet-labs above %s", dir)
		}
	}
}

// Upload sets the files of the file input that selector finds, as a user
// who picked them does (the input's change event fires).
func Upload(selector string, files ...string) chromedp.Action[chromedp.Void] {
	return chromedp.SetUploadFiles(chromedp.CSS(selector), files)
}
