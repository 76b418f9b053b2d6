package conformance

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"

	"kubelet-labs/hack/conformance/internal/harness"
	"kubelet-labs/hack/conformance/internal/images"
	"kubelet-labs/mycore/cri"
)

// TestFullClusterServesDNSAndServices starts the full cluster the
// certified suite runs on (two lab 18 nodes, kube-proxy and CoreDNS as
// their pods) and checks what the suite's network specs lean on, from a
// pod as a user would see it: the cluster's DNS answers for the
// apiserver's Service, the apiserver answers at its Service IP, and a
// Service on one node reaches a pod on the other. Then it stops the
// cluster and checks that this host has no kube-proxy rule left.
//
// The same with lab 01's real kubelet as both nodes (NODE=01; one
// containerd each, so skipped where only one is up), which leaves its
// containers running when it stops: after the cluster stopped, no pod
// sandbox of the cluster's may still be ready on either containerd.
func TestFullClusterServesDNSAndServices(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a full cluster writes this host's iptables (kube-proxy): root only")
	}
	rts, err := harness.FindRuntimes()
	l := needContainerd(t, err)
	t.Run("lab 18", func(t *testing.T) { fullCluster(t, l, rts, harness.NodeMyKubelet) })
	t.Run("lab 01, the real kubelet", func(t *testing.T) {
		if len(rts) < harness.FullClusterNodes {
			t.Skipf("the real kubelet's nodes need a containerd each, and %d is up: sudo scripts/containerd-up.sh --version 2.2,1.6", len(rts))
		}
		fullCluster(t, l, rts, harness.NodeRealKubelet)
	})
}

func fullCluster(t *testing.T, l *harness.Layout, rts []harness.Runtime, node string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	runDir := filepath.Join(l.Dir, "runs", "full-cluster-"+node+"-"+time.Now().Format("20060102-150405"))
	c, err := l.StartFor(ctx, harness.Options{
		Node: node, NodeName: "full-" + node, Full: true, RunDir: runDir,
		Images: []string{images.BusyBox}, Progress: testWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			if err := c.Stop(); err != nil {
				t.Errorf("stop: %v", err)
			}
		}
	}
	defer stop()
	if len(c.Nodes) != harness.FullClusterNodes {
		t.Fatalf("nodes %v, want %d", c.Nodes, harness.FullClusterNodes)
	}
	cs := c.Client
	ns := "full-cluster-test"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// a web server on the second node (busybox httpd), a client on the first
	pod := func(name, node string, cmd ...string) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
			Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{
				Name: "c", Image: images.BusyBox, ImagePullPolicy: v1.PullNever, Command: cmd,
			}}},
		}
	}
	web := pod("web", c.Nodes[1], "sh", "-c", "mkdir -p /www && echo hello-from-"+c.Nodes[1]+" > /www/index.html && exec httpd -f -p 8080 -h /www")
	client := pod("client", c.Nodes[0], "sleep", "3600")
	for _, p := range []*v1.Pod{web, client} {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: v1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []v1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// the same pod behind a Service with only a UDP port 80
	udp := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "udp-only"},
		Spec: v1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []v1.ServicePort{{Port: 80, Protocol: v1.ProtocolUDP, TargetPort: intstr.FromInt32(8080)}}},
	}
	if udp, err = cs.CoreV1().Services(ns).Create(ctx, udp, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web", "client"} {
		if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && p.Status.Phase == v1.PodRunning, nil
		}); err != nil {
			t.Fatalf("pod %s not Running: %v", name, err)
		}
	}
	kubectl := filepath.Join(l.ControlPlaneBinDir, "kubectl")
	inPod := func(cmd ...string) (string, error) {
		args := append([]string{"--kubeconfig", c.CP.AdminKubeconfig(), "-n", ns, "exec", "client", "--"}, cmd...)
		var out bytes.Buffer
		k := execCommand(ctx, kubectl, args...)
		k.Stdout, k.Stderr = &out, &out
		err := k.Run()
		return out.String(), err
	}
	// retried: the endpoints and kube-proxy's rules follow the pods by a moment
	check := func(what string, ok func(string) bool, cmd ...string) {
		t.Helper()
		var out string
		err := wait.PollUntilContextTimeout(ctx, 2*time.Second, time.Minute, true, func(context.Context) (bool, error) {
			var err error
			out, err = inPod(cmd...)
			return err == nil && ok(out), nil
		})
		if err != nil {
			t.Errorf("%s: %q, last output:\n%s", what, strings.Join(cmd, " "), out)
		}
	}
	check("the cluster's DNS names the apiserver's Service", func(o string) bool { return strings.Contains(o, "10.0.0.1") },
		"nslookup", "kubernetes.default.svc.cluster.local")
	// (busybox's nslookup asks for the name as given; wget resolves
	// through the C library, which walks the search path)
	check("a short name resolves through the pod's search path", func(o string) bool { return strings.Contains(o, "hello-from-"+c.Nodes[1]) },
		"wget", "-q", "-O", "-", "-T", "3", "http://web")
	check("the apiserver answers at its Service IP (through kube-proxy)", func(string) bool { return true },
		"nc", "-z", "-w", "3", "10.0.0.1", "443")
	check("a Service on one node reaches a pod on the other", func(o string) bool { return strings.Contains(o, "hello-from-"+c.Nodes[1]) },
		"wget", "-q", "-O", "-", "-T", "3", "http://web."+ns+".svc.cluster.local")
	// no answer on a port the Service does not have: the packet is not
	// translated and must not leave this host masqueraded (hostnet.go)
	if out, err := inPod("nc", "-z", "-w", "3", udp.Spec.ClusterIP, "80"); err == nil {
		t.Errorf("TCP to %s:80, a Service with only UDP 80, was answered:\n%s", udp.Spec.ClusterIP, out)
	}
	check("the pod's resolv.conf is the cluster's", func(o string) bool {
		return strings.Contains(o, "nameserver "+harness.ClusterDNS) && strings.Contains(o, "search "+ns+".svc.cluster.local svc.cluster.local cluster.local")
	}, "cat", "/etc/resolv.conf")

	stop()
	out, err := execCommand(context.Background(), "iptables-save").Output()
	if err != nil {
		t.Fatalf("iptables-save: %v", err)
	}
	if bytes.Contains(out, []byte("KUBE-SERVICES")) {
		t.Errorf("kube-proxy's rules are left on this host after the cluster stopped:\n%s", grepKube(out))
	}
	for _, rt := range rts {
		for _, left := range readySandboxes(t, rt, metav1.NamespaceSystem, ns) {
			t.Errorf("%s is still running on %s after the cluster stopped: a node left its pod behind (kube-proxy's would write its rules into this host again)", left, rt.Env.Endpoint)
		}
	}
}

// readySandboxes are the ready pod sandboxes in rt of pods of these
// namespaces, as "namespace/name".
func readySandboxes(t *testing.T, rt harness.Runtime, namespaces ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := cri.Dial(ctx, rt.Env.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var ready []string
	for _, ns := range namespaces {
		sbs, err := c.Pods(ctx, map[string]string{kubetypes.KubernetesPodNamespaceLabel: ns})
		if err != nil {
			t.Fatal(err)
		}
		for _, sb := range sbs {
			if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				ready = append(ready, ns+"/"+sb.GetMetadata().GetName())
			}
		}
	}
	return ready
}

var execCommand = exec.CommandContext

func grepKube(b []byte) string {
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "KUBE-") && len(lines) < 20 {
			lines = append(lines, l)
		}
	}
	return fmt.Sprint(strings.Join(lines, "\n"))
}
