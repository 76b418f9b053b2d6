package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/node"
	"kubelet-labs/mycore/podconfig"
)

// The tests below run fleets against a real control plane (started once
// for this package's test binary); the others need none.
func TestMain(m *testing.M) { testenv.Main(m) }

// running is a fleet whose Run goes on until the test ends.
type running struct {
	f    *Fleet
	log  *testenv.SyncBuffer
	errc chan error
}

// startFleet runs a fleet with o (its Log captured, its Lab label the
// test's) until the test ends, then deletes its Nodes.
func startFleet(t *testing.T, o Options) *running {
	t.Helper()
	admin := testenv.AdminClient(t)
	r := &running{log: &testenv.SyncBuffer{}, errc: make(chan error, 1)}
	o.Log = func(format string, args ...any) { fmt.Fprintf(r.log, format+"\n", args...) }
	o.Lab = "t-" + o.Prefix
	o.Dir = t.TempDir()
	f, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	r.f = f
	ctx, cancel := context.WithCancel(context.Background())
	go func() { r.errc <- f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-r.errc:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(time.Minute):
			t.Errorf("the fleet did not stop within 1m of cancel")
		}
		_ = admin.CoreV1().Nodes().DeleteCollection(context.Background(), metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: node.LabLabel + "=" + o.Lab})
		t.Logf("fleet log:\n%s", r.log)
	})
	return r
}

func (r *running) waitReady(t *testing.T) {
	t.Helper()
	select {
	case <-r.f.Ready():
	case err := <-r.errc:
		t.Fatalf("the fleet ended before it was ready: %v\n%s", err, r.log)
	case <-time.After(2 * time.Minute):
		t.Fatalf("the fleet was not ready after 2m:\n%s", r.log)
	}
}

// TestFleetIdentity: given the admin kubeconfig, the fleet sends nothing
// as the admin. A read that names no node goes as the fleet's own
// identity (the apiserver names kubelet-labs:fleet when it refuses what
// that identity may not read); a write that names no node is refused
// before it is sent; a node outside the fleet cannot be impersonated.
// Impersonated nodes still register, renew their Leases and pass
// NodeRestriction — which still refuses what a kubelet may not do.
func TestFleetIdentity(t *testing.T) {
	admin := testenv.AdminClient(t)
	calls := NewCalls()
	r := startFleet(t, Options{Config: testenv.AdminConfig(t), Nodes: 2, Prefix: "tid", LeaseDurationSeconds: 4, Calls: calls})
	r.waitReady(t)
	c, ctx := r.f.client, context.Background()

	// Reads without a node: the fleet's identity, which may list nodes
	// (the Node informer), not pods, not secrets.
	if _, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list nodes without a node (the Node informer's request): %v", err)
	}
	_, err := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermNotEqualSelector("spec.nodeName", "").String()})
	if !apierrors.IsForbidden(err) {
		t.Errorf("list every bound pod without a node: got %v, want Forbidden (each node lists its own)", err)
	}
	// A node's pod watch (podconfig.Watch): its own pods, as itself — the
	// Node authorizer allows that and only that.
	own := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", "tid-0000").String()}
	if _, err := c.CoreV1().Pods(metav1.NamespaceAll).List(asNode(ctx, "tid-0000"), own); err != nil {
		t.Errorf("tid-0000 lists its own pods: %v", err)
	}
	if _, err := c.CoreV1().Pods(metav1.NamespaceAll).List(asNode(ctx, "tid-0001"), own); !apierrors.IsForbidden(err) {
		t.Errorf("tid-0001 lists tid-0000's pods: got %v, want Forbidden", err)
	}
	_, err = c.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "`+IdentityUser+`"`) {
		t.Errorf("list secrets without a node: got %v, want Forbidden for user %s (not the admin, who may)", err, IdentityUser)
	}

	// Writes without a node: refused, nothing sent.
	postsBefore := count(calls, "POST", "nodes")
	_, err = c.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tid-rogue"}}, metav1.CreateOptions{})
	if !errors.Is(err, ErrNoNode) {
		t.Errorf("create a Node without a node in the context: got %v, want ErrNoNode", err)
	}
	if err := c.CoreV1().Pods(metav1.NamespaceDefault).Delete(ctx, "p", metav1.DeleteOptions{}); !errors.Is(err, ErrNoNode) {
		t.Errorf("delete a pod without a node in the context: got %v, want ErrNoNode", err)
	}
	if n := count(calls, "POST", "nodes"); n != postsBefore {
		t.Errorf("the refused create was sent: POST nodes %d → %d", postsBefore, n)
	}
	if _, err := admin.CoreV1().Nodes().Get(ctx, "tid-rogue", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Node tid-rogue: got %v, want NotFound", err)
	}

	// Only the fleet's own nodes may be impersonated.
	_, err = c.CoreV1().Nodes().Get(asNode(ctx, "tid-9999"), "tid-9999", metav1.GetOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `cannot impersonate resource "users"`) {
		t.Errorf("act as a node outside the fleet: got %v, want Forbidden: cannot impersonate", err)
	}

	// As its nodes: registered and leased through the Node authorizer and
	// NodeRestriction; a label of its own may be set, another node and a
	// node-restriction label may not (NodeRestriction, admission.go:501-560).
	// Ready means registered; each node's first Lease follows a moment
	// later, from its heartbeats (Fleet.Run), so it is waited for.
	for _, n := range r.f.Names() {
		testenv.PollNil(t, "the Lease of "+n+", held by "+n, 30*time.Second, func() error {
			l, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != n {
				return fmt.Errorf("holder %v", l.Spec.HolderIdentity)
			}
			return nil
		})
	}
	as0 := asNode(ctx, "tid-0000")
	label := func(key string) []byte { return fmt.Appendf(nil, `{"metadata":{"labels":{%q:"yes"}}}`, key) }
	if _, err := c.CoreV1().Nodes().Patch(as0, "tid-0000", types.MergePatchType, label("kubelet-labs.dev/test"), metav1.PatchOptions{}); err != nil {
		t.Errorf("tid-0000 labels its own Node: %v", err)
	}
	_, err = c.CoreV1().Nodes().Patch(as0, "tid-0001", types.MergePatchType, label("kubelet-labs.dev/test"), metav1.PatchOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `node "tid-0000" is not allowed to modify node "tid-0001"`) {
		t.Errorf("tid-0000 labels tid-0001: got %v, want NodeRestriction's Forbidden", err)
	}
	_, err = c.CoreV1().Nodes().Patch(as0, "tid-0000", types.MergePatchType, label("node-restriction.kubernetes.io/x"), metav1.PatchOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "is not allowed to modify labels") {
		t.Errorf("tid-0000 sets a node-restriction label: got %v, want NodeRestriction's Forbidden", err)
	}
}

// TestIdentityAgainIsNoConflict: a fleet started again (a shard
// restarted, the next round of the benchmark) finds its ClusterRole and
// binding and meets no 409 — the apiserver counts a create of an object
// that exists as a conflict — and a run with more nodes widens the role.
func TestIdentityAgainIsNoConflict(t *testing.T) {
	cfg := rest.CopyConfig(testenv.AdminConfig(t))
	calls := NewCalls()
	calls.Wrap(cfg)
	ctx, role := context.Background(), ShardRole("tia", 0, 0)
	for _, names := range [][]string{{"tia-0000"}, {"tia-0000"}, {"tia-0000", "tia-0001"}} {
		if _, err := ensureIdentity(ctx, cfg, role, names); err != nil {
			t.Fatalf("identity for %v: %v", names, err)
		}
	}
	for _, c := range calls.Counts() {
		if c.Code == 409 {
			t.Errorf("three starts: %s", c)
		}
	}
	got, err := testenv.AdminClient(t).RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fmt.Sprint(got.Rules), "tia-0001") {
		t.Errorf("after a start with two nodes the role names only %v", got.Rules)
	}
}

func count(c *Calls, verb, resource string) (n int64) {
	for _, cc := range c.Counts() {
		if cc.Verb == verb && cc.Resource == resource {
			n += cc.Count
		}
	}
	return n
}

// TestStuckNodeHoldsUpNoOther: one node whose Node create is refused, for
// ever (a ValidatingAdmissionPolicy), with one registration at a time —
// the other nodes still register and renew their Leases, pods bound to
// them still run while the stuck node's pods fill more than its buffer of
// pod updates, Ready stays open, and the stuck node keeps trying.
func TestStuckNodeHoldsUpNoOther(t *testing.T) {
	admin := testenv.AdminClient(t)
	ctx := context.Background()
	const stuck = "tstuck-0000"
	refuseNode(t, admin, stuck)

	r := startFleet(t, Options{Config: testenv.AdminConfig(t), Nodes: 3, Prefix: "tstuck", LeaseDurationSeconds: 4, RegisterParallelism: 1})
	others := r.f.Names()[1:]
	leases := admin.CoordinationV1().Leases(v1.NamespaceNodeLease)
	first := map[string]time.Time{}
	testenv.PollTrue(t, "a Lease for every node but "+stuck, 2*time.Minute, func() bool {
		for _, n := range others {
			l, err := leases.Get(ctx, n, metav1.GetOptions{})
			if err != nil || l.Spec.RenewTime == nil {
				return false
			}
			first[n] = l.Spec.RenewTime.Time
		}
		return true
	})
	testenv.PollTrue(t, "every Lease but "+stuck+"'s renewed (every 1s)", 2*time.Minute, func() bool {
		for _, n := range others {
			l, err := leases.Get(ctx, n, metav1.GetOptions{})
			if err != nil || !l.Spec.RenewTime.After(first[n]) {
				return false
			}
		}
		return true
	})
	if _, err := admin.CoreV1().Nodes().Get(ctx, stuck, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Node %s: got %v, want NotFound (its create is refused)", stuck, err)
	}
	if !strings.Contains(r.log.String(), "register "+stuck+": ") {
		t.Errorf("no failed registration of %s logged:\n%s", stuck, r.log)
	}
	select {
	case <-r.f.Ready():
		t.Errorf("Ready closed with %s not registered", stuck)
	default:
	}

	// More pods on the stuck node than its channel holds, then one on
	// another node: that one runs.
	testenv.WaitDefaultServiceAccount(t, admin)
	ns := testenv.Namespace(t, admin, "tstuck")
	testenv.WaitServiceAccount(t, admin, ns)
	pod := func(name, nodeName string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1.PodSpec{
			NodeName: nodeName, Containers: []v1.Container{{Name: "main", Image: "busybox", Command: []string{"sleep", "3600"}}},
		}}
	}
	for i := range podconfig.UpdatesBuffer + 1 {
		if _, err := admin.CoreV1().Pods(ns).Create(ctx, pod(fmt.Sprintf("on-stuck-%02d", i), stuck), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.CoreV1().Pods(ns).Create(ctx, pod("on-other", others[0]), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.PollTrue(t, "pod on-other Running on "+others[0], 2*time.Minute, func() bool {
		p, err := admin.CoreV1().Pods(ns).Get(ctx, "on-other", metav1.GetOptions{})
		return err == nil && p.Status.Phase == v1.PodRunning
	})
	// The stuck node's kubelet runs its pods all the same: with no Node
	// in the apiserver, admission takes the Node the node would register
	// (the kubelet's initialNode), not a rejection (InvalidNodeInfo).
	testenv.Poll(t, "pod on-stuck-00 Running on "+stuck, 2*time.Minute, func() (bool, error) {
		p, err := admin.CoreV1().Pods(ns).Get(ctx, "on-stuck-00", metav1.GetOptions{})
		if err == nil && p.Status.Phase == v1.PodFailed {
			return false, fmt.Errorf("Failed: %s: %s", p.Status.Reason, p.Status.Message)
		}
		return err == nil && p.Status.Phase == v1.PodRunning, nil
	})

	// And the stuck node never gives up (every 7 s at most, as the kubelet).
	tries := func() int { return strings.Count(r.log.String(), "register "+stuck+": ") }
	before := tries()
	testenv.PollTrue(t, stuck+" still trying to register", time.Minute, func() bool { return tries() > before })
}

// refuseNode makes the apiserver refuse every create of Node name (a
// ValidatingAdmissionPolicy and its binding, removed when the test ends),
// and waits until it does: policies are loaded a moment after they are made.
func refuseNode(t *testing.T, admin kubernetes.Interface, name string) {
	t.Helper()
	ctx := context.Background()
	policyName := "kubelet-labs-test-refuse-" + name
	fail := admissionregistrationv1.Fail
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"nodes"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("object.metadata.name != %q", name),
				Message:    "the test refuses this node's registration",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policyName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	ar := admin.AdmissionregistrationV1()
	if _, err := ar.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ar.ValidatingAdmissionPolicies().Delete(context.Background(), policyName, metav1.DeleteOptions{})
	})
	if _, err := ar.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ar.ValidatingAdmissionPolicyBindings().Delete(context.Background(), policyName, metav1.DeleteOptions{})
	})
	testenv.PollTrue(t, "the apiserver refuses to create Node "+name, time.Minute, func() bool {
		_, err := admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsInvalid(err) || apierrors.IsForbidden(err)
	})
}

// TestNodesRecordEventsAsThemselves: each node's events (Pulled, Created,
// Started…) reach the apiserver, written as that node, with the node as
// their source — also for two nodes that share one broadcaster (node 0
// and node EventWriters). Before, the nodes' event writes named no node
// and the fleet refused every one (ErrNoNode): kubectl describe pod
// showed no kubelet event for a fleet's pod.
func TestNodesRecordEventsAsThemselves(t *testing.T) {
	admin := testenv.AdminClient(t)
	ctx := context.Background()
	calls := NewCalls()
	r := startFleet(t, Options{Config: testenv.AdminConfig(t), Nodes: EventWriters + 1, Prefix: "tev", LeaseDurationSeconds: 4, Calls: calls})
	r.waitReady(t)
	testenv.WaitDefaultServiceAccount(t, admin)
	ns := testenv.Namespace(t, admin, "tev")
	testenv.WaitServiceAccount(t, admin, ns)
	names := r.f.Names()
	sharing := []string{names[0], names[EventWriters]} // one broadcaster
	for _, n := range sharing {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "on-" + n, Namespace: ns}, Spec: v1.PodSpec{
			NodeName: n, Containers: []v1.Container{{Name: "main", Image: "busybox", Command: []string{"sleep", "3600"}}},
		}}
		if _, err := admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range sharing {
		pod := "on-" + n
		testenv.PollNil(t, "kubelet events of pod "+pod, time.Minute, func() error {
			evs, err := admin.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", pod).String()})
			if err != nil {
				return err
			}
			var reasons []string
			for _, e := range evs.Items {
				if e.Source.Component != "kubelet" {
					continue
				}
				if e.Source.Host != n || e.ReportingInstance != n {
					return fmt.Errorf("event %s of %s: source %s/%s, reporting instance %s; want kubelet/%s", e.Reason, pod, e.Source.Component, e.Source.Host, e.ReportingInstance, n)
				}
				reasons = append(reasons, e.Reason)
			}
			for _, want := range []string{"Created", "Started"} {
				if !slices.Contains(reasons, want) {
					return fmt.Errorf("kubelet events %v, no %s yet", reasons, want)
				}
			}
			return nil
		})
	}
	if n := count(calls, "POST", "events"); n < 4 {
		t.Errorf("POST events: %d requests counted, want at least 4 (Created and Started of two pods)", n)
	}
}
