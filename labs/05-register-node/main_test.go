package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/bootstrap"
	"kubelet-labs/mycore/node"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// startLab runs the lab's run() in the test until the node is Ready; it
// is stopped when the test ends.
func startLab(t *testing.T, name string, edit func(*options)) *testenv.Lab[*joined] {
	t.Helper()
	cp := testenv.ControlPlane(t)
	t.Setenv("LABS_STATE_DIR", t.TempDir())
	o := options{kubeconfig: cp.AdminKubeconfig(), nodeName: name, leaseSeconds: 40, statusEvery: 10 * time.Second, timeout: time.Minute, approve: "auto"}
	if edit != nil {
		edit(&o)
	}
	return testenv.StartLab(t, func(ctx context.Context, out io.Writer, onReady func(*joined)) error {
		return run(ctx, o, labenv.NewPrinter(out), onReady)
	})
}

// TestJoinToReady: the whole join; what kubectl then sees.
func TestJoinToReady(t *testing.T) {
	ctx := context.Background()
	j := startLab(t, "t05-join", nil).L
	t.Logf("token → Ready in %s", j.elapsed)
	if !j.created || !j.join.TokenCreated || j.join.Skipped || !strings.HasPrefix(j.join.CSR.Approval, "AutoApproved") {
		t.Errorf("created=%v token=%v skipped=%v approval=%q", j.created, j.join.TokenCreated, j.join.Skipped, j.join.CSR.Approval)
	}
	if j.join.Node.Username != "system:node:t05-join" {
		t.Errorf("node identity %s", j.join.Node.Username)
	}
	admin := testenv.AdminClient(t)
	n, err := admin.CoreV1().Nodes().Get(ctx, "t05-join", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[v1.NodeConditionType]int{}
	for _, c := range n.Status.Conditions {
		seen[c.Type]++
	}
	for _, ct := range []v1.NodeConditionType{v1.NodeReady, v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		if seen[ct] != 1 {
			t.Errorf("condition %s appears %d times", ct, seen[ct])
		}
	}
	if c := node.GetCondition(&n.Status, v1.NodeReady); c == nil || c.Status != v1.ConditionTrue || c.Reason != "KubeletReady" {
		t.Errorf("Ready condition %+v", c)
	}
	// (The node lifecycle controller may add node.kubernetes.io/not-ready
	// until it has seen Ready=True; ours must be there.)
	hasTaint := false
	for _, taint := range n.Spec.Taints {
		hasTaint = hasTaint || taint.MatchTaint(&node.NoRuntimeTaint)
	}
	if n.Labels[node.LabLabel] == "" || n.Labels[v1.LabelHostname] != "t05-join" || !hasTaint {
		t.Errorf("labels %v taints %v", n.Labels, n.Spec.Taints)
	}
	if n.Status.NodeInfo.KubeletVersion != node.KubeletVersion || n.Status.Capacity.Pods().Value() != 110 {
		t.Errorf("nodeInfo %+v capacity %v", n.Status.NodeInfo, n.Status.Capacity)
	}
	l, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, "t05-join", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *l.Spec.HolderIdentity != "t05-join" || *l.Spec.LeaseDurationSeconds != 40 || len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != n.UID {
		t.Errorf("lease holder %s duration %d owners %+v", *l.Spec.HolderIdentity, *l.Spec.LeaseDurationSeconds, l.OwnerReferences)
	}
}

// TestLeaseRenewsEveryTenSeconds: renew = 0.25 × 40 s = 10 s, and over ~15 s
// the apiserver sees one or two Lease updates, not a hot loop.
func TestLeaseRenewsEveryTenSeconds(t *testing.T) {
	ctx := context.Background()
	j := startLab(t, "t05-lease", nil).L
	if j.agent.RenewInterval != 10*time.Second {
		t.Fatalf("renew interval %s, want 10s", j.agent.RenewInterval)
	}
	admin := testenv.AdminClient(t)
	w, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=t05-lease"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var renewals []time.Time
	deadline := time.After(15 * time.Second)
loop:
	for {
		select {
		case ev := <-w.ResultChan():
			if l, ok := ev.Object.(*coordinationv1.Lease); ok && ev.Type == watch.Modified {
				renewals = append(renewals, l.Spec.RenewTime.Time)
			}
		case <-deadline:
			break loop
		}
	}
	t.Logf("%d Lease updates in 15s: %v", len(renewals), renewals)
	if len(renewals) < 1 || len(renewals) > 3 {
		t.Errorf("%d Lease updates in 15s, want 1-2 (one per 10s)", len(renewals))
	}
	for i := 1; i < len(renewals); i++ {
		if d := renewals[i].Sub(renewals[i-1]); d < 9*time.Second || d > 11*time.Second {
			t.Errorf("renewals %s apart, want ~10s (jitter is 4%%)", d)
		}
	}
}

// TestNodeCannotTouchAnotherNode: the Node authorizer and NodeRestriction
// keep system:node:A away from node B, while A may change itself.
func TestNodeCannotTouchAnotherNode(t *testing.T) {
	ctx := context.Background()
	a := startLab(t, "t05-a", nil).L
	startLab(t, "t05-b", nil)
	asA := a.agent.Client
	admin := testenv.AdminClient(t)
	b, err := admin.CoreV1().Nodes().Get(ctx, "t05-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bLease, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, "t05-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	notReady := `{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Hijacked"}]}}`
	forbidden := map[string]func() error{
		"patch B's labels": func() error {
			_, err := asA.CoreV1().Nodes().Patch(ctx, "t05-b", types.MergePatchType, []byte(`{"metadata":{"labels":{"owned-by":"a"}}}`), metav1.PatchOptions{})
			return err
		},
		"patch B's status": func() error {
			_, err := asA.CoreV1().Nodes().Patch(ctx, "t05-b", types.StrategicMergePatchType, []byte(notReady), metav1.PatchOptions{}, "status")
			return err
		},
		"update B's status": func() error {
			n := b.DeepCopy()
			node.SetCondition(&n.Status, v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: "Hijacked"}, time.Now())
			_, err := asA.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
			return err
		},
		"update B": func() error {
			n := b.DeepCopy()
			n.Labels["owned-by"] = "a"
			_, err := asA.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
			return err
		},
		"renew B's lease": func() error {
			l := bLease.DeepCopy()
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			_, err := asA.CoordinationV1().Leases(v1.NamespaceNodeLease).Update(ctx, l, metav1.UpdateOptions{})
			return err
		},
		"delete B": func() error {
			return asA.CoreV1().Nodes().Delete(ctx, "t05-b", metav1.DeleteOptions{})
		},
		"create node C": func() error {
			_, err := asA.CoreV1().Nodes().Create(ctx, (node.Config{Name: "t05-c"}).InitialNode(time.Now()), metav1.CreateOptions{})
			return err
		},
	}
	for what, try := range forbidden {
		err := try()
		if !apierrors.IsForbidden(err) {
			t.Errorf("as system:node:t05-a, %s: err = %v, want Forbidden", what, err)
			continue
		}
		t.Logf("%s: %v", what, err)
	}
	if c := node.GetCondition(&mustGetNode(t, admin, "t05-b").Status, v1.NodeReady); c.Status != v1.ConditionTrue {
		t.Errorf("B's Ready became %s", c.Status)
	}
	// The Node authorizer: a node reads only its own Node object, even
	// listing (AuthorizeNodeWithSelectors, GA since 1.34).
	if _, err := asA.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot read all nodes, only its own Node object") {
		t.Errorf("list nodes as system:node:t05-a: %v, want Forbidden", err)
	}
	if l, err := asA.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=t05-a"}); err != nil || len(l.Items) != 1 {
		t.Errorf("list its own node by field selector: %v", err)
	}
	// A may change itself.
	if _, err := asA.CoreV1().Nodes().Patch(ctx, "t05-a", types.MergePatchType, []byte(`{"metadata":{"labels":{"example.com/self":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("A labels itself: %v", err)
	}
}

// nobodyElseApproves: the controller-manager's csrapproving controller
// approves a node client CSR only when a SubjectAccessReview for its
// requester allows create on certificatesigningrequests/nodeclient (or
// /selfnodeclient, for a node renewing its own) — sarapprove.go:62-76 and
// :120-140 in pkg/controller/certificates/approver at v1.36.3. Asking the
// same question answers "will it ever approve this one?" without waiting
// to see that it did not.
func nobodyElseApproves(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	admin := testenv.AdminClient(t)
	csr, err := admin.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(csr.Status.Conditions) != 0 {
		t.Fatalf("CSR %s already has %+v before anyone approved it", name, csr.Status.Conditions)
	}
	if !strings.HasPrefix(csr.Spec.Username, "system:bootstrap:") {
		t.Fatalf("CSR %s was requested by %q, want a bootstrap token", name, csr.Spec.Username)
	}
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range csr.Spec.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	for _, sub := range []string{"nodeclient", "selfnodeclient"} {
		sar, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: csr.Spec.Username, UID: csr.Spec.UID, Groups: csr.Spec.Groups, Extra: extra,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "certificates.k8s.io", Resource: "certificatesigningrequests", Verb: "create", Subresource: sub, Version: "*"},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed {
			t.Fatalf("%s %v may create certificatesigningrequests/%s: the controller-manager would approve %s by itself", csr.Spec.Username, csr.Spec.Groups, sub, name)
		}
	}
}

func mustGetNode(t *testing.T, c kubernetes.Interface, name string) *v1.Node {
	t.Helper()
	n, err := c.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRegisterRefusedIsNotAbsent: an identity that may neither create nor
// read nodes (a bootstrap token) gets the 403, and no Node exists after.
func TestRegisterRefusedIsNotAbsent(t *testing.T) {
	ctx := context.Background()
	cp := testenv.ControlPlane(t)
	admin := testenv.AdminClient(t)
	tok, err := bootstrap.CreateToken(ctx, admin, bootstrap.TokenOptions{TTL: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := cp.AdminConfig()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bootstrap.AuthenticateToken(ctx, cfg, tok, admin, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	asBootstrapper, err := kubernetes.NewForConfig(bootstrap.TokenConfig(cfg, tok.String()))
	if err != nil {
		t.Fatal(err)
	}
	_, created, err := node.Register(ctx, asBootstrapper, (node.Config{Name: "t05-never"}).InitialNode(time.Now()))
	if !apierrors.IsForbidden(err) || created {
		t.Fatalf("Register as a bootstrapper: created=%v err=%v, want Forbidden", created, err)
	}
	if _, err := admin.CoreV1().Nodes().Get(ctx, "t05-never", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node t05-never exists after a refused Register: %v", err)
	}
}

// TestConditionsByTypeAndReReady: another writer's condition, put first in
// the list, survives our status writes; when the lifecycle controller sets
// Ready=Unknown, the next sync posts Ready=True again.
func TestConditionsByTypeAndReReady(t *testing.T) {
	ctx := context.Background()
	j := startLab(t, "t05-conds", nil).L
	admin := testenv.AdminClient(t)
	// read-modify-write, again on a conflict: the lab posts its first
	// status right after it starts, which a loaded machine can delay until
	// just after our read
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := mustGetNode(t, admin, "t05-conds")
		n.Status.Conditions = append([]v1.NodeCondition{{
			Type: "example.com/KernelDeadlock", Status: v1.ConditionFalse, Reason: "KernelHasNoDeadlock",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}}, n.Status.Conditions...)
		node.SetCondition(&n.Status, v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionUnknown, Reason: "NodeStatusUnknown", Message: "set by the test"}, time.Now())
		_, err := admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &node.StatusReporter{Client: j.agent.Heartbeat, Node: node.Config{Name: "t05-conds"}}
	if patched, err := r.Sync(ctx); err != nil || !patched {
		t.Fatalf("sync: patched=%v err=%v", patched, err)
	}
	n := mustGetNode(t, admin, "t05-conds")
	if c := node.GetCondition(&n.Status, v1.NodeReady); c.Status != v1.ConditionTrue || time.Since(c.LastTransitionTime.Time) > 5*time.Second {
		t.Errorf("Ready after sync: %+v", c)
	}
	if c := node.GetCondition(&n.Status, "example.com/KernelDeadlock"); c == nil || c.Reason != "KernelHasNoDeadlock" {
		t.Errorf("the other writer's condition is gone: %+v", n.Status.Conditions)
	}
	if len(n.Status.Conditions) != 5 {
		t.Errorf("conditions %+v, want 5", n.Status.Conditions)
	}
	// Nothing changed: the next sync does not write (the lease is the heartbeat).
	if patched, err := r.Sync(ctx); err != nil || patched {
		t.Errorf("sync without changes: patched=%v err=%v, want no write", patched, err)
	}
}

// TestHeartbeatSurvivesAPIServerRestart: the apiserver goes away and comes
// back; the lab logs and retries, keeps running, and the lease moves on.
func TestHeartbeatSurvivesAPIServerRestart(t *testing.T) {
	ctx := context.Background()
	cp := testenv.ControlPlane(t)
	startLab(t, "t05-restart", func(o *options) { o.leaseSeconds = 8 }) // renew every 2s
	admin := testenv.AdminClient(t)
	before, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, "t05-restart", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := cp.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("apiserver restarted in %s", time.Since(t0))
	restarted := time.Now()
	var renewed time.Time
	testenv.PollTrue(t, "the Lease renewed after the apiserver restart", 30*time.Second, func() bool {
		l, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, "t05-restart", metav1.GetOptions{})
		if err != nil || !l.Spec.RenewTime.After(restarted) || !l.Spec.RenewTime.After(before.Spec.RenewTime.Time) {
			return false
		}
		renewed = l.Spec.RenewTime.Time
		return true
	})
	t.Logf("lease renewed at %s, %s after the restart", renewed.Format("15:04:05.000"), renewed.Sub(restarted).Round(time.Millisecond))
}

// TestProgram runs the built lab as a learner does: Ready in kubectl, then
// Ctrl-C; and bad input exits non-zero with a message.
func TestProgram(t *testing.T) {
	cp := testenv.ControlPlane(t)
	_, binDir := testenv.Binaries(t)
	bin := testenv.BuildLab(t, "./labs/05-register-node")
	env := []string{"KUBECONFIG=" + cp.AdminKubeconfig(), "LABS_STATE_DIR=" + t.TempDir()}

	p := testenv.StartProgram(t, bin, env, "--node-name=t05-program")
	p.WaitFor(t, "is Ready", 60*time.Second)
	kubectl := exec.Command(filepath.Join(binDir, "kubectl"), "get", "node", "t05-program", "--no-headers")
	kubectl.Env = append(os.Environ(), env...)
	got, err := kubectl.CombinedOutput()
	if err != nil || !strings.Contains(string(got), " Ready ") {
		t.Errorf("kubectl get node: %v\n%s", err, got)
	}
	p.Signal(syscall.SIGINT)
	if !p.WaitExit(30 * time.Second) {
		t.Fatalf("no exit 30s after Ctrl-C:\n%s", p.Output())
	}
	if code := p.ExitCode(); code != 0 || !strings.Contains(p.Output(), "stopped at") {
		t.Errorf("exit %d after Ctrl-C:\n%s", code, p.Output())
	}
	t.Logf("output:\n%s", p.Output())

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--node-lease-duration-seconds=0"}, "want 1..3600"},
		{[]string{"--token=abcdef.0000000000000000"}, "401 Unauthorized"},
		{[]string{"--node-name=Bad_Name"}, "not a valid Node name"},
		{[]string{"--node-name=../escape"}, `--node-name "../escape" is not a valid Node name`},
		{[]string{"--approve=maybe"}, "want auto"},
	} {
		state := t.TempDir()
		out, code := testenv.RunProgram(t, bin, []string{"KUBECONFIG=" + cp.AdminKubeconfig(), "LABS_STATE_DIR=" + state}, tc.args...)
		if code == 0 || !strings.Contains(out, tc.want) || strings.Contains(out, "panic") {
			t.Errorf("%v: exit %d, output:\n%s", tc.args, code, out)
		}
		// A refused name makes no folder, inside nodes/ or outside it.
		if strings.Contains(tc.want, "not a valid Node name") {
			for _, p := range []string{filepath.Join(state, "nodes"), filepath.Join(state, "escape")} {
				if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%v: %s exists after the refusal", tc.args, p)
				}
			}
		}
	}
}

// TestSecondRunReadsTheExistingNode: a node that restarts finds its Node
// through create → AlreadyExists → get, as the kubelet does.
func TestSecondRunReadsTheExistingNode(t *testing.T) {
	first := startLab(t, "t05-again", nil).L
	again := startLab(t, "t05-again", nil)
	second, out := again.L, again.Out
	if !first.created || second.created {
		t.Errorf("created: first %v, second %v; want true, false", first.created, second.created)
	}
	if !strings.Contains(out.String(), "register    Node t05-again: create said AlreadyExists") {
		t.Errorf("second run does not say what happened:\n%s", out)
	}
}

// TestManualApproval: --approve=manual makes a token outside the
// auto-approve group, prints the kubectl command, and waits; the real
// kubectl approves, and the node joins.
func TestManualApproval(t *testing.T) {
	cp := testenv.ControlPlane(t)
	_, binDir := testenv.Binaries(t)
	bin := testenv.BuildLab(t, "./labs/05-register-node")
	env := []string{"KUBECONFIG=" + cp.AdminKubeconfig(), "LABS_STATE_DIR=" + t.TempDir()}
	p := testenv.StartProgram(t, bin, env, "--node-name=t05-manual", "--approve=manual")
	p.WaitFor(t, "kubectl certificate approve node-csr-", 60*time.Second)
	m := regexp.MustCompile(`kubectl certificate approve (node-csr-\S+)`).FindStringSubmatch(p.Output())
	nobodyElseApproves(t, m[1])
	kubectl := exec.Command(filepath.Join(binDir, "kubectl"), "certificate", "approve", m[1])
	kubectl.Env = append(os.Environ(), env...)
	if b, err := kubectl.CombinedOutput(); err != nil {
		t.Fatalf("kubectl certificate approve: %v\n%s", err, b)
	}
	p.WaitFor(t, "is Ready", 60*time.Second)
	if out := p.Output(); !strings.Contains(out, "approved    KubectlApprove") || strings.Contains(out, bootstrap.AutoApproveGroup) {
		t.Errorf("output:\n%s", out)
	}
	p.Signal(syscall.SIGINT)
	if !p.WaitExit(30 * time.Second) {
		t.Fatalf("no exit 30s after Ctrl-C:\n%s", p.Output())
	}
}
