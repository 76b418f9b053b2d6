package harness

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kubelet-labs/hack/conformance/internal/images"
	"kubelet-labs/hack/conformance/internal/ociimage"
)

// The whole suite's images run, in the course's containerd, what the
// conformance specs run in them (IMAGES.md). Each image is imported into
// a containerd namespace of the test's own, which the test empties and
// removes; containers run with --rm. Skipped when containerd is not up,
// and the Debian-made images when apt-get is missing. The first run
// downloads the packages and builds agnhost and sample-apiserver.

type suiteLog struct{ t *testing.T }

func (w suiteLog) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// suiteImages makes the images named with the harness's sources, as
// Layout.Images does, without importing them.
func suiteImages(t *testing.T, names ...string) (*Layout, map[string]ociimage.Image) {
	t.Helper()
	l, err := NewLayout()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var src images.Sources
	if src.BusyBox, err = l.BusyBox(suiteLog{t}); err != nil {
		t.Fatal(err)
	}
	if want[images.Agnhost] || want[images.Kitten] || want[images.Nautilus] {
		if src.Agnhost, err = l.Build("agnhost", suiteLog{t}); err != nil {
			t.Fatal(err)
		}
		dir, err := l.moduleDir("k8s.io/kubernetes")
		if err != nil {
			t.Fatal(err)
		}
		src.PorterDir = filepath.Join(dir, "test", "images", "agnhost", "porter")
	}
	suite, err := l.suiteSources(want, false, suiteLog{t})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]ociimage.Image{}
	for _, spec := range images.SuiteSpecs(images.Specs(src), src, suite) {
		if !want[spec.Name] {
			continue
		}
		start := time.Now()
		im, err := spec.Build()
		if err != nil {
			t.Fatalf("%s: %v", spec.Name, err)
		}
		t.Logf("made %s in %s", spec.Name, time.Since(start).Round(10*time.Millisecond))
		got[spec.Name] = im
	}
	for _, n := range names {
		if _, ok := got[n]; !ok {
			t.Fatalf("no spec makes %s", n)
		}
	}
	return l, got
}

// testRuntime is the course's containerd and a namespace of the test's own.
type testRuntime struct {
	rt Runtime
	ns string
}

func newTestRuntime(t *testing.T) *testRuntime {
	t.Helper()
	rt, err := FindRuntime()
	if err != nil {
		t.Skipf("skipped: %v", err)
	}
	tr := &testRuntime{rt: rt, ns: fmt.Sprintf("conformance-images-test-%d", os.Getpid())}
	t.Cleanup(func() {
		out, _ := tr.ctr("images", "ls", "-q")
		for _, ref := range strings.Fields(out) {
			tr.ctr("images", "rm", "--sync", ref)
		}
		if out, err := tr.ctr("namespaces", "rm", tr.ns); err != nil {
			t.Errorf("ctr namespaces rm %s: %v: %s", tr.ns, err, out)
		}
	})
	return tr
}

func (tr *testRuntime) ctr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, tr.rt.Ctr, append([]string{"-a", tr.rt.Sock, "-n", tr.ns}, args...)...).CombinedOutput()
	return string(out), err
}

// run writes im, imports it and runs script with the image's sh in a
// privileged container (to bring its loopback up: ctr gives it a network
// namespace of its own with lo down); it returns the output.
func (tr *testRuntime) run(t *testing.T, im ociimage.Image, argv ...string) string {
	t.Helper()
	tr.importImage(t, im)
	id := fmt.Sprintf("t%d-%d", os.Getpid(), time.Now().UnixNano())
	out, err := tr.ctr(append([]string{"run", "--rm", "--privileged", im.Name, id}, argv...)...)
	if err != nil {
		t.Fatalf("%s: %s: %v\n%s", im.Name, strings.Join(argv, " "), err, out)
	}
	return out
}

// importImage writes im and imports it into the test's namespace.
func (tr *testRuntime) importImage(t *testing.T, im ociimage.Image) {
	t.Helper()
	tar := filepath.Join(t.TempDir(), "image.tar")
	if err := ociimage.Write(im, tar); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(tar); err == nil {
		t.Logf("%s: %.1f MB", im.Name, float64(fi.Size())/1e6)
	}
	if out, err := tr.ctr("images", "import", tar); err != nil {
		t.Fatalf("ctr images import: %v: %s", err, out)
	}
}

// serve is a script that starts the image's own entrypoint and command
// in the background and fetches url from it once it answers.
func serve(im ociimage.Image, url string) []string {
	var q []string
	for _, a := range append(append([]string(nil), im.Entrypoint...), im.Cmd...) {
		q = append(q, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	return []string{"sh", "-c", "ip link set lo up; " + strings.Join(q, " ") + " & " +
		"for i in $(seq 1 100); do if wget -qO- " + url + "; then kill $!; exit 0; fi; sleep 0.1; done; echo no answer from " + url + "; exit 1"}
}

func TestNginxServesPort80AndRunsPreStopShell(t *testing.T) {
	if why := images.DebTools(); why != "" {
		t.Skip("skipped: " + why)
	}
	tr := newTestRuntime(t)
	_, ims := suiteImages(t, images.Nginx)
	im := ims[images.Nginx]
	if out := tr.run(t, im, serve(im, "http://127.0.0.1:80/")...); !strings.Contains(out, "Welcome to nginx!") {
		t.Errorf("GET / of %s's command %q: want the welcome page, got:\n%s", images.Nginx, im.Cmd, out)
	}
	// pre_stop.go:233, the preStop hook
	if out := tr.run(t, im, "sh", "-c", "echo preStop; sleep 0"); !strings.Contains(out, "preStop") {
		t.Errorf("sh -c 'echo preStop' in %s: %q", images.Nginx, out)
	}
}

// dnsCommands are the tools dns_common.go:427-465 runs, minus a server to ask.
var dnsCommands = []string{"sh", "-c", "dig -v 2>&1; nslookup -version 2>&1; echo 10.0.0.7 probe-host >> /etc/hosts; getent hosts probe-host; seq 1 2"}

func checkDNSTools(t *testing.T, name, out string) {
	t.Helper()
	for _, want := range []string{"DiG 9.18", "nslookup 9.18", "10.0.0.7        probe-host", "1\n2\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("%s: the DNS specs' tools: want %q in the output:\n%s", name, want, out)
		}
	}
}

func TestGlibcDNSTestingHasDigAndGetent(t *testing.T) {
	if why := images.DebTools(); why != "" {
		t.Skip("skipped: " + why)
	}
	tr := newTestRuntime(t)
	_, ims := suiteImages(t, images.GlibcDNSTesting)
	checkDNSTools(t, images.GlibcDNSTesting, tr.run(t, ims[images.GlibcDNSTesting], dnsCommands...))
}

func TestAgnhostHasDigGetentAndNetcat(t *testing.T) {
	if why := images.DebTools(); why != "" {
		t.Skip("skipped: " + why)
	}
	tr := newTestRuntime(t)
	_, ims := suiteImages(t, images.Agnhost)
	checkDNSTools(t, images.Agnhost, tr.run(t, ims[images.Agnhost], dnsCommands...))
	// the Service specs' probe (test/e2e/framework/service/jig.go): a
	// closed port on loopback, refused at once, with OpenBSD's -t accepted
	out := tr.run(t, ims[images.Agnhost], "sh", "-c", "echo hostName | nc -v -t -w 2 127.0.0.1 1 2>&1; echo rc=$?")
	if !strings.Contains(out, "refused") || strings.Contains(out, "invalid option") {
		t.Errorf("%s: nc -v -t -w 2 (OpenBSD netcat): want a refused connection, got:\n%s", images.Agnhost, out)
	}
}

func TestKittenAndNautilusServeTheirData(t *testing.T) {
	tr := newTestRuntime(t)
	_, ims := suiteImages(t, images.Kitten, images.Nautilus)
	for name, jpg := range map[string]string{images.Kitten: "kitten.jpg", images.Nautilus: "nautilus.jpg"} {
		im := ims[name]
		// kubectl.go:2439 GETs data.json through the pod proxy (port 80)
		if out := tr.run(t, im, serve(im, "http://127.0.0.1:80/data.json")...); !strings.Contains(out, `"image": "`+jpg+`"`) {
			t.Errorf("%s: GET /data.json: want %s, got:\n%s", name, jpg, out)
		}
	}
	// image_volume.go:83-84 cats it from the mounted kitten image
	if out := tr.run(t, ims[images.Kitten], "cat", "/data.json"); !strings.Contains(out, "kitten.jpg") {
		t.Errorf("%s: /data.json: %s", images.Kitten, out)
	}
}

func TestSampleAPIServerAndEtcdRun(t *testing.T) {
	tr := newTestRuntime(t)
	_, ims := suiteImages(t, images.SampleAPIServer, images.Etcd)
	// its loader and libraries are in the image: it starts and knows the
	// flags aggregator.go:254-260 passes
	sa := ims[images.SampleAPIServer]
	out := tr.run(t, sa, append(append([]string(nil), sa.Entrypoint...), "--help")...)
	for _, flag := range []string{"--etcd-servers", "--tls-cert-file", "--audit-log-path"} {
		if !strings.Contains(out, flag) {
			t.Errorf("%s --help: no %s in:\n%.400s", images.SampleAPIServer, flag, out)
		}
	}
	// aggregator.go:281 runs /usr/local/bin/etcd
	if out := tr.run(t, ims[images.Etcd], "/usr/local/bin/etcd", "--version"); !strings.Contains(out, "etcd Version: "+images.EtcdVersion) {
		t.Errorf("%s: /usr/local/bin/etcd --version: %s", images.Etcd, out)
	}
}

// The node suite's "Container Runtime blackbox test when running a
// container with a new image" specs run `agnhost fake-registry-server
// --private` as uid 5123 on the host network and pull
// localhost:5000/pause:testing with and without a pull secret
// (test/e2e/framework/registry/registry.go:108-136,
// test/e2e/common/node/runtime.go:296-310 at v1.36.3). Here the server
// runs the same way, on a free port (its --port flag) so that a running
// suite's port 5000 is left alone, and containerd pulls from it.
func TestAgnhostServesPauseFromItsPrivateRegistry(t *testing.T) {
	tr := newTestRuntime(t)
	_, ims := suiteImages(t, images.Agnhost)
	im := ims[images.Agnhost]
	tr.importImage(t, im)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	id := fmt.Sprintf("registry-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() {
		tr.ctr("tasks", "kill", "-s", "SIGKILL", id)
		tr.ctr("tasks", "rm", "-f", id)
		if out, err := tr.ctr("containers", "rm", id); err != nil && !strings.Contains(out, "not found") {
			t.Errorf("ctr containers rm %s: %v: %s", id, err, out)
		}
	})
	if out, err := tr.ctr("run", "-d", "--null-io", "--net-host", "--user", "5123", im.Name, id,
		"/agnhost", "fake-registry-server", "--private", "--port", fmt.Sprint(port)); err != nil {
		t.Fatalf("ctr run %s fake-registry-server: %v: %s", images.Agnhost, err, out)
	}
	// it answers /v2/ with 401 once it listens (registryserver.go:79-90)
	base := fmt.Sprintf("http://127.0.0.1:%d/v2/", port)
	answered := false
	for i := 0; i < 100 && !answered; i++ {
		if resp, err := http.Get(base); err == nil {
			resp.Body.Close()
			answered = resp.StatusCode == http.StatusUnauthorized
		} else {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !answered {
		out, _ := tr.ctr("tasks", "ls")
		t.Fatalf("fake-registry-server --private: no 401 from %s; tasks:\n%s", base, out)
	}

	ref := fmt.Sprintf("localhost:%d/%s", port, images.RegistryPause)
	// runtime.go:296-299: without a secret the pull is refused: the
	// server answers 401 with a Basic challenge, which containerd reports
	// as "authorization failed: no basic auth credentials"
	if resp, err := http.Get(base + "pause/manifests/testing"); err != nil {
		t.Error(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET %spause/manifests/testing without credentials: %s, want 401", base, resp.Status)
	}
	if out, err := tr.ctr("images", "pull", "--plain-http", ref); err == nil || !strings.Contains(out, "authorization failed") {
		t.Errorf("ctr images pull %s without credentials: want an authorization failure (401), got %v:\n%s", ref, err, out)
	}
	// runtime.go:301-304: with the secret's user:password it pulls
	out, err := tr.ctr("images", "pull", "--plain-http", "--user", "user:password", ref)
	if err != nil {
		t.Fatalf("ctr images pull %s with user:password: %v:\n%s", ref, err, out)
	}
	// what it pulled is the manifest the tag names
	var digest string
	for _, e := range im.Entries {
		if e.Path == images.RegistryDir+"/pause/manifests/testing" {
			digest = strings.TrimSpace(string(e.Data))
		}
	}
	if out, err := tr.ctr("images", "ls", "name=="+ref); err != nil || digest == "" || !strings.Contains(out, digest) {
		t.Errorf("ctr images ls: want %s at the tag's digest %q after the pull: %v:\n%s", ref, digest, err, out)
	}
	// and it runs: the "with secret" spec waits for its pod to be Running
	run := fmt.Sprintf("pause-%d-%d", os.Getpid(), time.Now().UnixNano())
	if out, err := tr.ctr("run", "--rm", ref, run, "/pause", "--version"); err != nil || !strings.Contains(out, "kubelet-labs-pause") {
		t.Errorf("ctr run %s /pause --version: %v:\n%s", ref, err, out)
	}
}
