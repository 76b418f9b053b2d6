package podconfig

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/internal/testenv"
)

// fileLog collects what the file source logs.
type fileLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *fileLog) print(s string) { l.mu.Lock(); l.lines = append(l.lines, s); l.mu.Unlock() }

func (l *fileLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func (l *fileLog) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

func (l *fileLog) waitFor(t *testing.T, s string) {
	t.Helper()
	testenv.PollNil(t, fmt.Sprintf("a log line with %q", s), 30*time.Second, func() error {
		if l.has(s) {
			return nil
		}
		return fmt.Errorf("the log so far:\n%s", l)
	})
}

type fileSourceRun struct {
	ch     <-chan kubetypes.PodUpdate
	log    *fileLog
	cancel context.CancelFunc
}

// noLeaks checks, once every cleanup of the test has run, that no
// goroutine started during the test is left. Call it first.
func noLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// startFiles runs Files on dir as node "node-a" until the test ends, then
// checks that the channel closed once the context ended.
func startFiles(t *testing.T, dir string, period time.Duration) *fileSourceRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &fileLog{}
	r := &fileSourceRun{ch: Files(ctx, LineLogger(l.print, 0, 0), dir, "node-a", period), log: l, cancel: cancel}
	t.Cleanup(func() {
		cancel()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case _, ok := <-r.ch:
				if ok {
					continue
				}
			case <-deadline:
				t.Fatal("the channel was not closed within 30s of the end of the context")
			}
			break
		}
	})
	return r
}

// expectFile is the next update, which must be op with pods named names
// (in order), all from the file source.
func (r *fileSourceRun) expect(t *testing.T, want string) kubetypes.PodUpdate {
	t.Helper()
	u := next(t, r.ch)
	if got := describe(u); got != want {
		t.Fatalf("got %q, want %q (log:\n%s)", got, want, r.log)
	}
	if u.Source != kubetypes.FileSource {
		t.Errorf("source %q, want %q", u.Source, kubetypes.FileSource)
	}
	for _, p := range u.Pods {
		if p.Annotations[kubetypes.ConfigSourceAnnotationKey] != kubetypes.FileSource || p.Annotations[kubetypes.ConfigFirstSeenAnnotationKey] == "" {
			t.Errorf("pod %s annotations %v: want config.source=file and config.seen", p.Name, p.Annotations)
		}
	}
	return u
}

// nothing checks that no update arrives for a while (the source sends
// only differences).
func (r *fileSourceRun) nothing(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case u := <-r.ch:
		t.Fatalf("unexpected update %q", describe(u))
	case <-time.After(d):
	}
}

// put writes a manifest as an admin should: under a dot-name the source
// ignores, then renamed into place in one step.
func put(t *testing.T, dir, file, body string) {
	t.Helper()
	tmp := filepath.Join(dir, "."+file+".tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, file)); err != nil {
		t.Fatal(err)
	}
}

func podYAML(name, image string, extra string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels: {app: %s}
%sspec:
  containers:
  - name: main
    image: %s
`, name, name, extra, image)
}

// TestFilesPodShape: what one manifest becomes — the pod the kubelet runs
// and whose mirror pod the apiserver shows.
func TestFilesPodShape(t *testing.T) {
	noLeaks(t)
	dir := t.TempDir()
	put(t, dir, "web.yaml", podYAML("web", "busybox:1.35.0", ""))
	r := startFiles(t, dir, time.Hour)
	p := r.expect(t, "ADD web-node-a").Pods[0]

	if p.Namespace != "default" || p.Spec.NodeName != "node-a" {
		t.Errorf("namespace %q nodeName %q, want default and node-a", p.Namespace, p.Spec.NodeName)
	}
	if len(p.UID) != 32 || p.Annotations[kubetypes.ConfigHashAnnotationKey] != string(p.UID) {
		t.Errorf("UID %q, config.hash %q: want a 128-bit hex hash, the same in both", p.UID, p.Annotations[kubetypes.ConfigHashAnnotationKey])
	}
	if !kubetypes.IsStaticPod(p) {
		t.Error("IsStaticPod is false")
	}
	if p.Status.Phase != v1.PodPending {
		t.Errorf("phase %q", p.Status.Phase)
	}
	tolerated := false
	for _, tol := range p.Spec.Tolerations {
		tolerated = tolerated || (tol.Operator == v1.TolerationOpExists && tol.Effect == v1.TaintEffectNoExecute && tol.Key == "")
	}
	if !tolerated {
		t.Errorf("tolerations %v: want every NoExecute taint tolerated", p.Spec.Tolerations)
	}
	// The API's defaults, as for a pod sent to the apiserver.
	c := p.Spec.Containers[0]
	if p.Spec.RestartPolicy != v1.RestartPolicyAlways || p.Spec.DNSPolicy != v1.DNSClusterFirst ||
		p.Spec.TerminationGracePeriodSeconds == nil || *p.Spec.TerminationGracePeriodSeconds != 30 ||
		c.ImagePullPolicy != v1.PullIfNotPresent || c.TerminationMessagePath != v1.TerminationMessagePathDefault {
		t.Errorf("defaults missing: restartPolicy %q dnsPolicy %q grace %v pullPolicy %q terminationMessagePath %q",
			p.Spec.RestartPolicy, p.Spec.DNSPolicy, p.Spec.TerminationGracePeriodSeconds, c.ImagePullPolicy, c.TerminationMessagePath)
	}

	// The same file read again, by a new source (a kubelet restart), is
	// the same pod: same UID. Moved to another file name, another pod.
	again := startFiles(t, dir, time.Hour).expect(t, "ADD web-node-a").Pods[0]
	if again.UID != p.UID {
		t.Errorf("UID changed on a second read of the same file: %s → %s", p.UID, again.UID)
	}
	other := t.TempDir()
	put(t, other, "web.yaml", podYAML("web", "busybox:1.35.0", ""))
	if moved := startFiles(t, other, time.Hour).expect(t, "ADD web-node-a").Pods[0]; moved.UID == p.UID {
		t.Errorf("the same manifest in another file has the same UID %s", p.UID)
	}
}

// TestFilesOps: create, edit, fixed-UID edit, remove — each as the ops
// PodConfig would send, within inotify time (the periodic read is an hour
// away here).
func TestFilesOps(t *testing.T) {
	noLeaks(t)
	dir := t.TempDir()
	r := startFiles(t, dir, time.Hour)
	r.expect(t, "ADD") // empty, but sent: the source is ready

	put(t, dir, "web.yaml", podYAML("web", "busybox:1.35.0", ""))
	web := r.expect(t, "ADD web-node-a").Pods[0]

	// An edit is a new pod: the UID is the hash of the content.
	put(t, dir, "web.yaml", podYAML("web", "busybox:1.36.0", ""))
	r.expect(t, "REMOVE web-node-a")
	web2 := r.expect(t, "ADD web-node-a").Pods[0]
	if web2.UID == web.UID || web2.Spec.Containers[0].Image != "busybox:1.36.0" {
		t.Errorf("after the edit: UID %s (was %s), image %s", web2.UID, web.UID, web2.Spec.Containers[0].Image)
	}

	// Touching the file without changing it sends nothing.
	now := time.Now()
	if err := os.Chtimes(filepath.Join(dir, "web.yaml"), now, now); err != nil {
		t.Fatal(err)
	}
	r.nothing(t, 500*time.Millisecond)

	// With metadata.uid in the manifest the UID stays: an edit is an UPDATE.
	put(t, dir, "fixed.yaml", podYAML("fixed", "busybox:1.35.0", "  uid: fixed-uid\n"))
	fixed := r.expect(t, "ADD fixed-node-a").Pods[0]
	put(t, dir, "fixed.yaml", podYAML("fixed", "busybox:1.36.0", "  uid: fixed-uid\n"))
	upd := r.expect(t, "UPDATE fixed-node-a").Pods[0]
	if upd.UID != "fixed-uid" || upd.Annotations[kubetypes.ConfigFirstSeenAnnotationKey] != fixed.Annotations[kubetypes.ConfigFirstSeenAnnotationKey] {
		t.Errorf("UPDATE: UID %s, first seen %q (was %q)", upd.UID, upd.Annotations[kubetypes.ConfigFirstSeenAnnotationKey], fixed.Annotations[kubetypes.ConfigFirstSeenAnnotationKey])
	}

	if err := os.Remove(filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	if u := r.expect(t, "REMOVE web-node-a"); u.Pods[0].UID != web2.UID {
		t.Errorf("REMOVE of UID %s, want %s", u.Pods[0].UID, web2.UID)
	}
	// A dot-file is never read.
	if err := os.WriteFile(filepath.Join(dir, ".hidden.yaml"), []byte(podYAML("hidden", "busybox:1.35.0", "")), 0o644); err != nil {
		t.Fatal(err)
	}
	r.nothing(t, 500*time.Millisecond)
}

// TestFilesBadManifests: logged and skipped; the good ones still run, and
// a manifest that turns bad loses its pod at the next full read.
func TestFilesBadManifests(t *testing.T) {
	noLeaks(t)
	dir := t.TempDir()
	bad := map[string]string{
		"garbage.yaml":   "{ this is not yaml",
		"noname.yaml":    "apiVersion: v1\nkind: Pod\nspec:\n  containers: [{name: c, image: busybox}]\n",
		"service.yaml":   "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
		"invalid.yaml":   strings.Replace(podYAML("invalid", "busybox", ""), "name: main", "name: Main_Container", 1),
		"secret.yaml":    podYAML("secret", "busybox", "") + "  volumes:\n  - name: s\n    secret: {secretName: x}\n",
		"dup-of-ok.yaml": podYAML("ok", "busybox:1.36.0", ""),
	}
	for f, body := range bad {
		put(t, dir, f, body)
	}
	put(t, dir, "a-ok.yaml", podYAML("ok", "busybox:1.35.0", ""))
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := startFiles(t, dir, 300*time.Millisecond)
	ok := r.expect(t, "ADD ok-node-a").Pods[0]
	if ok.Spec.Containers[0].Image != "busybox:1.35.0" {
		t.Errorf("of two files naming pod ok, the first by file name must win; got image %s", ok.Spec.Containers[0].Image)
	}
	for _, want := range []string{
		"Could not process manifest file", "garbage.yaml",
		"name is needed for the pod",
		"not a Pod",
		"invalid pod", "Main_Container",
		"static pods may not reference secrets",
		"duplicate pod name",
		"not recursing into manifest path",
	} {
		r.log.waitFor(t, want)
	}

	// Broken in place (a write, not a rename): the watch keeps the pod it
	// had, the next full read drops it.
	if err := os.WriteFile(filepath.Join(dir, "a-ok.yaml"), []byte("kind: Pod\n  oops"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "dup-of-ok.yaml")); err != nil {
		t.Fatal(err)
	}
	r.expect(t, "REMOVE ok-node-a")
}

// TestFilesFolderAppearsLater: no folder is "no static pods" (ready, empty);
// once it exists, its manifests count without waiting for the period.
func TestFilesFolderAppearsLater(t *testing.T) {
	noLeaks(t)
	dir := filepath.Join(t.TempDir(), "manifests")
	r := startFiles(t, dir, time.Hour)
	r.expect(t, "ADD")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	put(t, dir, "web.yaml", podYAML("web", "busybox:1.35.0", ""))
	r.expect(t, "ADD web-node-a")
	// The folder removed and made again: still watched.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	r.expect(t, "REMOVE web-node-a")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	put(t, dir, "db.json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"db"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`)
	r.expect(t, "ADD db-node-a")
}

// TestFilesSingleFile: the path may be one manifest file.
func TestFilesSingleFile(t *testing.T) {
	noLeaks(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "web.yaml")
	put(t, dir, "web.yaml", podYAML("web", "busybox:1.35.0", ""))
	r := startFiles(t, file, time.Hour)
	r.expect(t, "ADD web-node-a")
	put(t, dir, "web.yaml", podYAML("web", "busybox:1.36.0", ""))
	r.expect(t, "REMOVE web-node-a")
	r.expect(t, "ADD web-node-a")
}

// TestFilesStopsWithoutReader: a source blocked on a full channel that
// nobody reads still ends with its context (the cleanup checks for leaks).
func TestFilesStopsWithoutReader(t *testing.T) {
	noLeaks(t)
	dir := t.TempDir()
	r := startFiles(t, dir, time.Hour)
	for i := range 2 * UpdatesBuffer {
		put(t, dir, "web.yaml", podYAML("web", fmt.Sprintf("busybox:1.%d", i), ""))
	}
	time.Sleep(200 * time.Millisecond)
	r.cancel()
}
