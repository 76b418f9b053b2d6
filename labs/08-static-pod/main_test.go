package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/podconfig"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(kubeletSourceEnv); dir != "" {
		// the exercise's child process: the kubelet's own file source,
		// which never stops (twofiles_test.go)
		os.Exit(runKubeletFileSource(dir))
	}
	testenv.Main(m)
}

type lab struct {
	*testenv.Lab[string]
	node      string
	manifests string
	admin     kubernetes.Interface
}

// startLab runs the lab in-process as node name, with its default
// manifests folder in a fresh state folder, and returns once both sources
// have sent their first update. When the test ends the lab is stopped,
// and no goroutine of it may be left.
func startLab(t *testing.T, name string) *lab {
	t.Helper()
	testenv.NoLeaks(t)
	cp := testenv.ControlPlane(t)
	stateDir := t.TempDir()
	t.Setenv(state.EnvVar, stateDir)
	admin := testenv.AdminClient(t)
	t.Cleanup(func() { // after the lab has stopped: its mirror pods stay, as when a kubelet dies
		zero := int64(0)
		pods, _ := admin.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
		for _, pod := range pods.Items {
			_ = admin.CoreV1().Pods("default").Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
	})
	o := options{kubeconfig: cp.AdminKubeconfig(), nodeName: name, fileCheck: podconfig.DefaultFileCheckFrequency, housekeeping: 2 * time.Second, timeout: 2 * time.Minute}
	l := testenv.StartLab(t, func(ctx context.Context, out io.Writer, ready func(string)) error {
		return run(ctx, o, labenv.NewPrinter(out), ready)
	})
	if want := filepath.Join(stateDir, "nodes", name, "manifests"); l.L != want {
		t.Fatalf("manifests folder %s, want the default %s", l.L, want)
	}
	return &lab{Lab: l, node: name, manifests: l.L, admin: admin}
}

// put writes a manifest the way a careful admin does: into a dot-file (the
// file source ignores those), then renamed into place in one step.
func (l *lab) put(t *testing.T, file, body string) {
	t.Helper()
	tmp := filepath.Join(l.manifests, "."+file+".tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(l.manifests, file)); err != nil {
		t.Fatal(err)
	}
}

func manifest(name, label string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels: {app: %s}
spec:
  containers:
  - name: c
    image: registry.k8s.io/pause:3.10
`, name, label)
}

// waitMirror polls until the mirror pod satisfies ok.
func (l *lab) waitMirror(t *testing.T, name, what string, ok func(*v1.Pod, error) bool) *v1.Pod {
	t.Helper()
	var got *v1.Pod
	testenv.PollTrue(t, fmt.Sprintf("mirror pod %s: %s", name, what), time.Minute, func() bool {
		p, err := l.admin.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		got = p
		return ok(p, err)
	})
	return got
}

// TestStaticPodLifecycle: what the README shows, seen through the
// apiserver as kubectl sees it.
func TestStaticPodLifecycle(t *testing.T) {
	l := startLab(t, "t08-life")
	ctx := context.Background()
	node, err := l.admin.CoreV1().Nodes().Get(ctx, l.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mirrorName := "web-" + l.node

	// A manifest appears: so does its mirror pod, owned by the Node.
	l.put(t, "web.yaml", manifest("web", "v1"))
	m1 := l.waitMirror(t, mirrorName, "created", func(p *v1.Pod, err error) bool { return err == nil })
	hash := m1.Annotations[kubetypes.ConfigHashAnnotationKey]
	if hash == "" || m1.Annotations[kubetypes.ConfigMirrorAnnotationKey] != hash {
		t.Errorf("annotations %v: want config.mirror = config.hash", m1.Annotations)
	}
	if len(m1.OwnerReferences) != 1 || m1.OwnerReferences[0].Kind != "Node" || m1.OwnerReferences[0].UID != node.UID {
		t.Errorf("owners %+v, want one: Node %s uid %s", m1.OwnerReferences, node.Name, node.UID)
	}
	if m1.Spec.NodeName != l.node || m1.Status.Phase != v1.PodPending {
		t.Errorf("nodeName %q phase %q", m1.Spec.NodeName, m1.Status.Phase)
	}

	// The file is edited: a new hash, a new mirror pod.
	l.put(t, "web.yaml", manifest("web", "v2"))
	m2 := l.waitMirror(t, mirrorName, "replaced after the edit", func(p *v1.Pod, err error) bool {
		return err == nil && p.Labels["app"] == "v2" && p.DeletionTimestamp == nil
	})
	if m2.UID == m1.UID || m2.Annotations[kubetypes.ConfigMirrorAnnotationKey] == hash {
		t.Errorf("after the edit: uid %s (was %s), hash %s (was %s)", m2.UID, m1.UID, m2.Annotations[kubetypes.ConfigMirrorAnnotationKey], hash)
	}
	l.Out.WaitLine(t, 30*time.Second, "the static pod now has hash")

	// kubectl delete pod: the node makes it again.
	if err := l.admin.CoreV1().Pods("default").Delete(ctx, mirrorName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	m3 := l.waitMirror(t, mirrorName, "recreated after kubectl delete", func(p *v1.Pod, err error) bool {
		return err == nil && p.UID != m2.UID && p.DeletionTimestamp == nil
	})
	if m3.Annotations[kubetypes.ConfigMirrorAnnotationKey] != m2.Annotations[kubetypes.ConfigMirrorAnnotationKey] {
		t.Errorf("recreated mirror has hash %s, want the same %s", m3.Annotations[kubetypes.ConfigMirrorAnnotationKey], m2.Annotations[kubetypes.ConfigMirrorAnnotationKey])
	}

	// Bad manifests: one clear line each, and the lab goes on.
	l.put(t, "noname.yaml", strings.Replace(manifest("x", "x"), "name: x\n", "", 1))
	// the watch or a full read reports it first, in different words: the
	// file and the reason are in both
	l.Out.WaitLine(t, 30*time.Second, "kubelet:", "noname.yaml", "invalid pod: name is needed for the pod")
	l.put(t, "broken.yaml", "this: is: not yaml\n  - [")
	l.Out.WaitLine(t, 30*time.Second, "kubelet:", "broken.yaml", "yaml: mapping values are not allowed")
	l.put(t, "db.yaml", manifest("db", "db"))
	l.waitMirror(t, "db-"+l.node, "created after the bad manifests", func(p *v1.Pod, err error) bool { return err == nil })

	// The file goes: so does the mirror pod.
	if err := os.Remove(filepath.Join(l.manifests, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	l.waitMirror(t, mirrorName, "deleted with its file", func(p *v1.Pod, err error) bool { return apierrors.IsNotFound(err) })
	l.Out.WaitLine(t, 30*time.Second, "delete-orphan web-"+l.node+"_default")
}

// TestMirrorVisibleLatency measures static pod file → mirror pod visible
// to a watcher, 10 times (logged, not asserted: it depends on the machine).
func TestMirrorVisibleLatency(t *testing.T) {
	l := startLab(t, "t08-p50")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := l.admin.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + l.node})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var took []time.Duration
	for i := 0; i < 10; i++ {
		name := fmt.Sprintf("p%d", i)
		start := time.Now()
		l.put(t, name+".yaml", manifest(name, "p50"))
		deadline := time.After(time.Minute)
	wait:
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("watch closed")
				}
				if p, isPod := ev.Object.(*v1.Pod); isPod && ev.Type == watch.Added && p.Name == name+"-"+l.node {
					took = append(took, time.Since(start))
					break wait
				}
			case <-deadline:
				t.Fatalf("mirror of %s not seen within 1m:\n%s", name, l.Out)
			}
		}
	}
	sorted := append([]time.Duration(nil), took...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	t.Logf("static pod file → mirror pod visible (watch ADDED), 10 runs: p50 %s, min %s, max %s, all %v",
		sorted[4].Round(time.Millisecond), sorted[0].Round(time.Millisecond), sorted[9].Round(time.Millisecond), took)
}

// TestBadInput: a bad flag is one clear line and exit code 2, before
// anything starts; no cluster is one line and exit code 1.
func TestBadInput(t *testing.T) {
	cp := testenv.ControlPlane(t)
	stateDir := t.TempDir()
	t.Setenv(state.EnvVar, stateDir)
	file := filepath.Join(stateDir, "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	exec := func(args ...string) (string, int) {
		var o options
		var stdout, stderr strings.Builder
		code := labenv.Exec(labenv.Lab{Name: "08-static-pod", Flags: o.flags, Check: o.check,
			Run: func(ctx context.Context, out *labenv.Printer) error { return run(ctx, o, out, nil) }},
			args, &stdout, &stderr)
		return stdout.String() + stderr.String(), code
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--node-name", "Lab_Node"}, 2, `--node-name "Lab_Node" is not a valid Node name`},
		{[]string{"--housekeeping-interval", "0"}, 2, "must be positive"},
		{[]string{"--kubeconfig", cp.AdminKubeconfig(), "--manifests", file}, 1, "static pod folder"},
	} {
		out, code := exec(c.args...)
		if code != c.code || !strings.Contains(out, "error: ") || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, output:\n%s\nwant exit %d and %q", c.args, code, out, c.code, c.want)
		}
	}
	t.Setenv("KUBECONFIG", "")
	if out, code := exec(); code != 1 || !strings.Contains(out, "00-cluster") {
		t.Errorf("no cluster: exit %d:\n%s", code, out)
	}
}
