package mykubelet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/node"
	"kubelet-labs/mylib/fakecri"
)

// The test harness of this package: one of our kubelets on the mock CRI
// (in this process), joined to the test's control plane.

func TestMain(m *testing.M) { testenv.Main(m) }

// The mock uses the image names of the course's containerd; busybox2 is a
// second image for a pod whose image is changed.
const (
	mockPauseImage    = "localhost/kubelet-labs/pause:1.0"
	mockBusyboxImage  = "localhost/kubelet-labs/busybox:1.35.0"
	mockBusybox2Image = "localhost/kubelet-labs/busybox:1.36.1"
)

// lines collects the kubelet's log, printed if the test fails (t.Logf
// cannot be called once the test has ended, and the kubelet's goroutines
// may still log then).
type lines struct {
	mu    sync.Mutex
	start time.Time
	l     []string
}

func (l *lines) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.l = append(l.l, fmt.Sprintf("%8.3fs ", time.Since(l.start).Seconds())+fmt.Sprintf(format, args...))
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.l, "\n")
}

// has reports whether one log line contains every part.
func (l *lines) has(parts ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
next:
	for _, line := range l.l {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue next
			}
		}
		return true
	}
	return false
}

// testNode is a node joined to the control plane, with its own mock CRI
// and static pod folder. Kubelets run on it one after the other (start),
// as a kubelet restarts on a machine whose containers keep running.
type testNode struct {
	name      string
	dir       string
	manifests string
	cri       *cri.Client
	client    kubernetes.Interface // the node's own credentials
	config    *rest.Config         // the same credentials, for a client of a test's own
	admin     kubernetes.Interface
	log       *lines
}

// newNode joins node name and starts its mock CRI (with mock's options
// besides the course's images), both until the test ends; at the very end
// it checks that no goroutine is left.
func newNode(t *testing.T, name string, mock ...fakecri.Option) *testNode {
	t.Helper()
	testenv.NoLeaks(t) // first: its check runs after every other cleanup
	// A short folder: the mock's socket lives in it (108 bytes at most).
	dir, err := os.MkdirTemp("", "kubelet-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Setenv(state.EnvVar, dir)
	ctx := context.Background()

	j, err := node.Join(ctx, node.JoinOptions{Admin: testenv.AdminConfig(t), Dir: testenv.NodeDir(t, name), Name: name, Lab: "test-kubelet", NoTaint: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Stop)
	srv, err := fakecri.Start(filepath.Join(dir, "cri.sock"),
		append([]fakecri.Option{fakecri.WithPauseImage(mockPauseImage), fakecri.WithImages(mockBusyboxImage, mockBusybox2Image)}, mock...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	crc, err := cri.Dial(ctx, srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { crc.Close() })

	n := &testNode{name: name, dir: dir, manifests: filepath.Join(dir, "manifests"), cri: crc,
		client: j.Client, config: j.Config, admin: testenv.AdminClient(t), log: &lines{start: time.Now()}}
	if err := os.Mkdir(n.manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kubelet log:\n%s", n.log)
		}
	})
	return n
}

// running is one Run of a Kubelet.
type running struct {
	k      *Kubelet
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	took   time.Duration // from the cancel to Run's return
}

// start runs a Kubelet with opts on the node until stop or the end of the
// test, which also removes what it left in the runtime.
func (n *testNode) start(t *testing.T, opts Options) *running {
	t.Helper()
	opts.NodeName, opts.Client, opts.CRI = n.name, n.client, n.cri
	opts.PodLogsDir, opts.HostIPs, opts.Log = filepath.Join(n.dir, "pod-logs"), []string{"127.0.0.1"}, n.log.logf
	k, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{k: k, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- k.Run(ctx) }()
	t.Cleanup(func() {
		r.stop(t)
		if _, err := k.RemoveAll(context.Background()); err != nil {
			t.Errorf("RemoveAll: %v", err)
		}
	})
	return r
}

// stop ends Run's context and waits for Run to return.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.once.Do(func() {
		began := time.Now()
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(time.Minute):
			t.Errorf("Run did not return within a minute of the end of its context")
		}
		r.took = time.Since(began)
	})
}

// startNode is newNode and a Kubelet running on it with opts, with the
// node's static pod folder unless opts names one.
func startNode(t *testing.T, name string, opts Options) *testNode {
	t.Helper()
	n := newNode(t, name)
	if opts.StaticPodPath == "" {
		opts.StaticPodPath = n.manifests
	}
	n.start(t, opts)
	return n
}

// patient bounds every wait for the node (testenv.PollNil): a pod through
// the mock runtime and the apiserver, on 2 shared cores.
const patient = 2 * time.Minute

// notFound is, for PollNil, nil once a Get's err says the object is gone,
// and otherwise why it is not gone yet.
func notFound(err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err == nil:
		return errors.New("it is still there")
	}
	return err
}

// containers are the containers the mock has for the pod with this UID,
// in every sandbox of it.
func (n *testNode) containers(t *testing.T, uid string) []*runtimeapi.Container {
	t.Helper()
	ctx := context.Background()
	sandboxes, err := n.cri.Pods(ctx, map[string]string{"io.kubernetes.pod.uid": uid})
	if err != nil {
		t.Fatal(err)
	}
	var out []*runtimeapi.Container
	for _, s := range sandboxes {
		cs, err := n.cri.Containers(ctx, s.Id)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, cs...)
	}
	return out
}

// containerState is what the mock says of one container: its state and,
// once it exited, its exit code and when.
func (n *testNode) containerState(t *testing.T, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	st, err := n.cri.ContainerStatus(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// namespace is a new namespace for the test's pods, named after the node.
func (n *testNode) namespace(t *testing.T) string {
	t.Helper()
	return testenv.Namespace(t, n.admin, n.name)
}

// createPod creates a pod bound to the node (as the scheduler would have)
// with one container, main, running script in sh.
func (n *testNode) createPod(t *testing.T, ns, name string, grace int64, script string) *v1.Pod {
	t.Helper()
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1.PodSpec{
			NodeName:                      n.name,
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []v1.Container{{Name: "main", Image: mockBusyboxImage, Command: []string{"sh", "-c", script}}},
		},
	}
	got, err := n.admin.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// getPod is the pod as the apiserver has it.
func (n *testNode) getPod(ns, name string) (*v1.Pod, error) {
	return n.admin.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
}

// runningPod waits until the apiserver shows the pod Running with its
// container main running, and returns it.
func (n *testNode) runningPod(t *testing.T, ns, name string) *v1.Pod {
	t.Helper()
	var p *v1.Pod
	testenv.PollNil(t, "pod "+name+" Running", patient, func() error {
		var err error
		if p, err = n.getPod(ns, name); err != nil {
			return err
		}
		if p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
			return fmt.Errorf("phase %s, container statuses %v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		return nil
	})
	return p
}

// runtimeID is the runtime's ID of a container status's containerID
// ("fakecri://ID").
func runtimeID(cs v1.ContainerStatus) string {
	_, id, _ := strings.Cut(cs.ContainerID, "://")
	return id
}
