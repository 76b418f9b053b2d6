package fleetmode

import (
	"context"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelet-labs/internal/browsertest"
	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/fleet"
	"kubelet-labs/mycore/node"
)

// TestFleetView opens fleet mode's live view in headless Chromium: a grid
// with a cell per node, every one Ready, the pods the nodes run counted,
// and the fleet's API request rate. Any JavaScript error fails the test.
func TestFleetView(t *testing.T) {
	cp := testenv.ControlPlane(t)
	admin := testenv.AdminClient(t)
	t.Setenv("LABS_STATE_DIR", t.TempDir())
	const nodes = 12
	o := Options{Kubeconfig: cp.AdminKubeconfig(), Nodes: nodes, prefix: "t18v", qps: -1, burst: 400,
		RelistPeriod: time.Second, leaseSeconds: 8, statusEvery: 10 * time.Second,
		memoryLimit: "none", gcPercent: 0, View: "127.0.0.1:0"}
	ctx, cancel := context.WithCancel(context.Background())
	out := &testenv.SyncBuffer{}
	ready := make(chan *fleet.Fleet, 1)
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, o, labenv.NewPrinter(out), func(f *fleet.Fleet) { ready <- f }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("fleet: %v", err)
		}
		_ = admin.CoreV1().Nodes().DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: node.LabLabel + "=18-mykubelet"})
	})
	select {
	case <-ready:
	case err := <-errc:
		errc <- err
		t.Fatalf("fleet ended before it was ready: %v\n%s", err, out)
	case <-time.After(2 * time.Minute):
		t.Fatalf("fleet not ready after 2m:\n%s", out)
	}
	m := regexp.MustCompile(`view    (http://127\.0\.0\.1:\d+/\?token=\S+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("fleet mode printed no view URL:\n%s", out)
	}

	ns := testenv.Namespace(t, admin, "lab18-fleetview")
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: ns},
		Spec: v1.PodSpec{NodeName: "t18v-0003", Containers: []v1.Container{{Name: "c", Image: "busybox", Command: []string{"sleep", "3600"}}}}}
	if _, err := admin.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	page := browsertest.Open(t, m[1])
	shown := `document.getElementById('fleet-summary').textContent + ' | ' + document.getElementById('fleet-rate').textContent + ' | ' + document.getElementById('conn').textContent`
	page.WaitFor(t, "every node Ready, with the pod", `document.getElementById('fleet-summary').textContent === '12 nodes, 12 Ready, 1 pods'`, shown, time.Minute)
	page.WaitFor(t, "a cell per node, none NotReady", `document.querySelectorAll('.cell').length === 12 && !document.querySelector('.cell.notready')`, shown, 10*time.Second)
	page.WaitFor(t, "the API request rate", `/^apiserver requests: [0-9.]+ per second \(\d+ in all\)$/.test(document.getElementById('fleet-rate').textContent)`, shown, 30*time.Second)
	page.WaitFor(t, "the node's pod in its cell", `document.querySelector('.cell[data-node="t18v-0003"]').title.endsWith(', 1 pod(s)')`, shown, 10*time.Second)
	if hidden := page.Text(t, `['machine','pleg','timeline'].filter(id => document.getElementById(id).hidden).join(',')`); hidden != "machine,pleg,timeline" {
		t.Errorf("fleet mode shows one node's sections (hidden: %q)", hidden)
	}
	page.Screenshot(t, "18-live-view-fleet")
	page.NoErrors(t)
}

// TestFleetViewPortInUse: a --view port that is taken stops fleet mode
// before any node registers, with a one-line error.
func TestFleetViewPortInUse(t *testing.T) {
	cp := testenv.ControlPlane(t)
	admin := testenv.AdminClient(t)
	t.Setenv("LABS_STATE_DIR", t.TempDir())
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	o := Options{Kubeconfig: cp.AdminKubeconfig(), Nodes: 2, prefix: "t18busy", qps: -1, burst: 400,
		RelistPeriod: time.Second, leaseSeconds: 8, statusEvery: 10 * time.Second,
		memoryLimit: "none", gcPercent: 0, View: busy.Addr().String()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = Run(ctx, o, labenv.NewPrinter(&testenv.SyncBuffer{}), func(*fleet.Fleet) { t.Error("the fleet came up") })
	if err == nil || !strings.Contains(err.Error(), "live view: listen tcp "+busy.Addr().String()) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("got %v, want one line saying the view's port is taken", err)
	}
	nodes, err := admin.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: node.LabLabel + "=18-mykubelet"})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if strings.HasPrefix(n.Name, "t18busy-") {
			t.Errorf("node %s registered by a run that failed", n.Name)
		}
	}
}
