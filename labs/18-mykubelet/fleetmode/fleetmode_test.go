package fleetmode

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/fleet"
	"kubelet-labs/mycore/node"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestFleet: five of our nodes in one process against the real control
// plane. Each is Ready with a Lease that is renewed; twenty pods bound
// round-robin run (each node its own pod IP range) and, deleted, are gone —
// each deleted once, by its node; nothing is left running after the stop.
func TestFleet(t *testing.T) {
	cp := testenv.ControlPlane(t)
	admin := testenv.AdminClient(t)
	t.Setenv("LABS_STATE_DIR", t.TempDir())
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		// client-go keeps idle keep-alive connections to the apiserver
		// (and their reader goroutines) in its shared, cached transport.
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*http2ClientConn).readLoop"),
	)
	const nodes, pods = 5, 20
	stats := filepath.Join(t.TempDir(), "stats.json")
	o := Options{Kubeconfig: cp.AdminKubeconfig(), Nodes: nodes, prefix: "t18", qps: -1, burst: 400,
		RelistPeriod: time.Second, leaseSeconds: 4, statusEvery: 10 * time.Second, statsFile: stats,
		memoryLimit: "none", gcPercent: 0} // process-wide: not in a test binary
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &testenv.SyncBuffer{}
	ready := make(chan *fleet.Fleet, 1)
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, o, labenv.NewPrinter(out), func(f *fleet.Fleet) { ready <- f }) }()
	var f *fleet.Fleet
	select {
	case f = <-ready:
	case err := <-errc:
		t.Fatalf("fleet ended before it was ready: %v\n%s", err, out)
	case <-time.After(2 * time.Minute):
		t.Fatalf("fleet not ready after 2m:\n%s", out)
	}
	names := f.Names()
	if len(names) != nodes || names[0] != "t18-0000" || names[nodes-1] != "t18-0004" {
		t.Fatalf("names %v", names)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().Nodes().DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: node.LabLabel + "=18-mykubelet"})
	})

	// Nodes: Ready, and a Lease each, renewed.
	leases := admin.CoordinationV1().Leases(v1.NamespaceNodeLease)
	first := map[string]time.Time{}
	for _, n := range names {
		got, err := admin.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c := node.GetCondition(&got.Status, v1.NodeReady); c == nil || c.Status != v1.ConditionTrue {
			t.Errorf("node %s not Ready: %v", n, got.Status.Conditions)
		}
		if p := got.Status.Capacity[v1.ResourcePods]; p.Value() != 110 {
			t.Errorf("node %s reports %s pods, want 110", n, p.String())
		}
		l := waitLease(t, admin, n)
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != n {
			t.Errorf("lease %s holder %v", n, l.Spec.HolderIdentity)
		}
		first[n] = l.Spec.RenewTime.Time
	}
	testenv.PollTrue(t, "every lease renewed (renew interval 1s)", time.Minute, func() bool {
		for _, n := range names {
			l, err := leases.Get(ctx, n, metav1.GetOptions{})
			if err != nil || !l.Spec.RenewTime.After(first[n]) {
				return false
			}
		}
		return true
	})

	// Pods, bound round-robin, Running.
	ns := "t18-fleet"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	waitServiceAccount(t, admin, ns)
	for i := range pods {
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%02d", i), Namespace: ns},
			Spec: v1.PodSpec{NodeName: names[i%nodes], Containers: []v1.Container{{
				Name: "main", Image: "busybox", Command: []string{"sh", "-c", "echo hello; sleep 3600"},
			}}},
		}
		if _, err := admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var running []v1.Pod
	testenv.PollTrue(t, fmt.Sprintf("%d pods Running", pods), 2*time.Minute, func() bool {
		list, err := admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		running = running[:0]
		for _, p := range list.Items {
			if p.Status.Phase == v1.PodRunning {
				running = append(running, p)
			}
		}
		return len(running) == pods
	})
	ips := map[string]string{}
	for _, p := range running {
		i := 0
		fmt.Sscanf(p.Name, "p-%d", &i)
		// each node hands out its own /24: 10.64.N.0/24 for node N
		wantPrefix := fmt.Sprintf("10.64.%d.", i%nodes)
		if !strings.HasPrefix(p.Status.PodIP, wantPrefix) || p.Status.HostIP != "127.0.0.1" {
			t.Errorf("pod %s on %s: podIP %q (want %s*), hostIP %q", p.Name, p.Spec.NodeName, p.Status.PodIP, wantPrefix, p.Status.HostIP)
		}
		if other, dup := ips[p.Status.PodIP]; dup {
			t.Errorf("pods %s and %s share IP %s", p.Name, other, p.Status.PodIP)
		}
		ips[p.Status.PodIP] = p.Name
		if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil || !p.Status.ContainerStatuses[0].Ready {
			t.Errorf("pod %s container status %+v", p.Name, p.Status.ContainerStatuses)
		}
	}

	// Deleted as kubectl does (grace 30 s; the mock's sleep dies on
	// SIGTERM at once) → gone.
	for i := range pods {
		if err := admin.CoreV1().Pods(ns).Delete(ctx, fmt.Sprintf("p-%02d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.PollTrue(t, "every pod gone after its delete", 2*time.Minute, func() bool {
		list, err := admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0
	})

	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("fleet did not stop within 1m of cancel")
	}
	var st Stats
	b, err := os.ReadFile(stats)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	deletes := int64(0)
	for _, c := range st.Calls {
		if c.Verb == "DELETE" && c.Resource == "pods" {
			deletes += c.Count
		}
	}
	if deletes != pods || st.Wasted != (fleet.Wasted{}) {
		t.Errorf("the fleet deleted pods %d times (want %d, once each) and wasted %+v (want none)", deletes, pods, st.Wasted)
	}
	// The requests that name no node — the shared informers' lists and
	// watches — go as the fleet's own identity, which may make them. (A
	// node's GET of a pod may get 403 now and then: the Node authorizer's
	// graph lags behind a pod's create and delete, "no relationship found".)
	for _, c := range st.Calls {
		if (c.Verb == "LIST" || c.Verb == "WATCH") && (c.Code == http.StatusForbidden || c.Code == http.StatusUnauthorized) {
			t.Errorf("the fleet's identity was refused: %s", c)
		}
	}
	if !strings.Contains(out.String(), "identity "+fleet.IdentityUser) {
		t.Errorf("the fleet did not say which identity it uses:\n%s", out)
	}
	t.Logf("fleet output:\n%s", out)
}

// TestFleetBadInput: clear one-line errors before anything starts.
func TestFleetBadInput(t *testing.T) {
	t.Setenv("LABS_STATE_DIR", t.TempDir())
	missing := filepath.Join(t.TempDir(), "nope.kubeconfig")
	good := Options{Kubeconfig: missing, Nodes: 1, prefix: "t18", qps: -1, burst: 1, RelistPeriod: time.Second, leaseSeconds: 40, statusEvery: 10 * time.Second, memoryLimit: "none"}
	for _, c := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"no nodes", func(o *Options) { o.Nodes = 0 }, "--nodes 0: must be 1 to 10000"},
		{"too many", func(o *Options) { o.Nodes = fleet.MaxNodes + 1 }, "must be 1 to 10000"},
		{"bad prefix", func(o *Options) { o.prefix = "Bad_Prefix" }, `--node-prefix "Bad_Prefix"`},
		{"zero relist", func(o *Options) { o.RelistPeriod = 0 }, "--relist-period"},
		{"tiny memory limit", func(o *Options) { o.memoryLimit = "1Mi" }, "--memory-limit"},
		{"profiler off loopback", func(o *Options) { o.pprofAddr = "0.0.0.0:6060" }, "only a loopback address"},
		{"shard out of range", func(o *Options) { o.shard = "3/3" }, `--shard "3/3": want I/N`},
		{"shard not a fraction", func(o *Options) { o.shard = "1" }, `--shard "1"`},
		{"shards over the names", func(o *Options) { o.Nodes, o.shard = 5000, "2/3" }, "3 shards of 5000 nodes: more than 10000"},
		{"nodes per connection", func(o *Options) { o.perConn = -1 }, "--nodes-per-connection -1: must be at least 1"},
		{"status writes", func(o *Options) { o.statusWrites = -1 }, "--status-writes -1: must be at least 1"},
		{"no cluster", func(o *Options) {}, "nope.kubeconfig"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := good
			c.edit(&o)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := Run(ctx, o, labenv.NewPrinter(&testenv.SyncBuffer{}), nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
			if strings.Contains(err.Error(), "\n") && c.name != "no cluster" {
				t.Errorf("want one line, got %q", err)
			}
		})
	}
}

func waitLease(t *testing.T, c kubernetes.Interface, name string) *coordinationv1.Lease {
	t.Helper()
	var got *coordinationv1.Lease
	testenv.PollTrue(t, "the lease of "+name, time.Minute, func() bool {
		l, err := c.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(context.Background(), name, metav1.GetOptions{})
		got = l
		return err == nil
	})
	return got
}

func waitServiceAccount(t *testing.T, c kubernetes.Interface, ns string) {
	t.Helper()
	testenv.Poll(t, "service account "+ns+"/default", 2*time.Minute, func() (bool, error) {
		_, err := c.CoreV1().ServiceAccounts(ns).Get(context.Background(), "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// TestGCSettings: GOGC 50 unless the environment sets GOGC; a memory
// limit only when asked; bad values are clear errors.
func TestGCSettings(t *testing.T) {
	t.Setenv("GOGC", "")
	for _, c := range []struct {
		gc      int
		limit   string
		wantGC  int
		wantMem int64
		err     string
	}{
		{50, "none", 50, 0, ""},
		{0, "", 0, 0, ""},
		{80, "2Gi", 80, 2 << 30, ""},
		{-1, "none", 0, 0, "--gc-percent -1"},
		{50, "10Mi", 0, 0, "at least 64Mi"},
		{50, "900MiB", 0, 0, "want none or a size"},
	} {
		gc, mem, why, err := Options{gcPercent: c.gc, memoryLimit: c.limit}.gcSettings()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%d %q: got %v, want an error with %q", c.gc, c.limit, err, c.err)
			}
			continue
		}
		if err != nil || gc != c.wantGC || mem != c.wantMem || why == "" {
			t.Errorf("%d %q: got %d %d (%q, %v), want %d %d", c.gc, c.limit, gc, mem, why, err, c.wantGC, c.wantMem)
		}
	}
	t.Setenv("GOGC", "200")
	if gc, _, why, err := (Options{gcPercent: 50, memoryLimit: "none"}).gcSettings(); err != nil || gc != 0 || !strings.Contains(why, "GOGC=200") {
		t.Errorf("with GOGC set: got %d %q %v, want it left to the runtime", gc, why, err)
	}
}

// TestFleetFlagsNeedNodes: a flag of fleet mode typed without --nodes is
// refused in one line (the single node would run and ignore it); with
// --nodes, or --nodes 0 alone, nothing is refused.
func TestFleetFlagsNeedNodes(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // "" for no error
	}{
		{[]string{"--status-writes", "-1"}, "--status-writes is a flag of fleet mode: add --nodes N"},
		{[]string{"--events=false"}, "--events is a flag of fleet mode"},
		{[]string{"--nodes", "10", "--status-writes", "64"}, ""},
		{[]string{"--nodes", "0"}, ""},
		{[]string{"--lab-flag", "x"}, ""},
	} {
		fs := flag.NewFlagSet("lab", flag.ContinueOnError)
		fs.String("lab-flag", "", "a flag of the lab, registered before fleet mode's")
		var o Options
		o.Register(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		err := o.OnlyWithNodes()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v, want no error", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n")):
			t.Errorf("%v: %v, want one line containing %q", c.args, err, c.want)
		}
	}
}
