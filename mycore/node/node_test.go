package node

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestSetConditionByType: conditions are found by type wherever they are;
// a foreign condition is left alone; LastTransitionTime moves only on a
// change of Status.
func TestSetConditionByType(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	st := v1.NodeStatus{Conditions: []v1.NodeCondition{
		{Type: "example.com/Foreign", Status: v1.ConditionTrue},
		{Type: v1.NodeReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)},
		{Type: v1.NodeDiskPressure, Status: v1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0)},
	}}
	SetCondition(&st, v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "again"}, t1)
	if c := GetCondition(&st, v1.NodeReady); c.Reason != "again" || !c.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("same status: %+v, want the old transition time", c)
	}
	SetCondition(&st, v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionUnknown}, t1)
	if c := GetCondition(&st, v1.NodeReady); c.Status != v1.ConditionUnknown || !c.LastTransitionTime.Time.Equal(t1) {
		t.Errorf("changed status: %+v, want transition at t1", c)
	}
	SetCondition(&st, v1.NodeCondition{Type: v1.NodePIDPressure, Status: v1.ConditionFalse}, t1)
	if len(st.Conditions) != 4 || st.Conditions[3].Type != v1.NodePIDPressure || st.Conditions[0].Type != "example.com/Foreign" {
		t.Errorf("conditions %+v", st.Conditions)
	}
}

// TestSetStatusKeepsOthersAndReady: our setters own four conditions, Ready
// True with full capacity, and leave foreign ones where they are.
func TestSetStatusKeepsOthersAndReady(t *testing.T) {
	n := &v1.Node{Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: "example.com/Foreign", Status: v1.ConditionFalse}}}}
	Config{Name: "n1"}.SetStatus(n, time.Now())
	if len(n.Status.Conditions) != 5 || n.Status.Conditions[0].Type != "example.com/Foreign" {
		t.Fatalf("conditions %+v", n.Status.Conditions)
	}
	if c := GetCondition(&n.Status, v1.NodeReady); c.Status != v1.ConditionTrue {
		t.Errorf("Ready %+v", c)
	}
	// Missing capacity is not Ready (the kubelet's ReadyCondition).
	n2 := &v1.Node{}
	Config{Name: "n2", Capacity: v1.ResourceList{v1.ResourcePods: MachineCapacity()[v1.ResourcePods]}}.SetStatus(n2, time.Now())
	if c := GetCondition(&n2.Status, v1.NodeReady); c.Status != v1.ConditionFalse || c.Reason != "KubeletNotReady" {
		t.Errorf("Ready without cpu/memory: %+v", c)
	}
}

func TestStatusChangedIgnoresHeartbeats(t *testing.T) {
	a := &v1.Node{}
	Config{Name: "n"}.SetStatus(a, time.Now())
	b := a.DeepCopy()
	Config{Name: "n"}.SetStatus(b, time.Now().Add(time.Minute)) // new heartbeat times only
	if statusChanged(&a.Status, &b.Status) {
		t.Error("a new heartbeat time counts as a change")
	}
	SetCondition(&b.Status, v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionUnknown}, time.Now())
	if !statusChanged(&a.Status, &b.Status) {
		t.Error("Ready True -> Unknown is not a change")
	}
}

// TestRegisterInTheKubeletsOrder: Create first; AlreadyExists or
// Forbidden lead to a Get of the existing Node; nothing else is guessed at,
// and nothing is ever deleted or updated.
func TestRegisterInTheKubeletsOrder(t *testing.T) {
	gr := schema.GroupResource{Resource: "nodes"}
	forbidden := apierrors.NewForbidden(gr, "n1", errors.New("no"))
	etcdDown := apierrors.NewInternalError(errors.New("etcd down"))
	for name, tc := range map[string]struct {
		exists      bool
		createErr   error // besides the fake's own AlreadyExists
		getErr      error
		wantGets    int
		wantCreated bool
		wantErr     func(error) bool
	}{
		"new: created, no get":                  {wantCreated: true},
		"exists: AlreadyExists, get, use it":    {exists: true, wantGets: 1},
		"500: the error, no get":                {createErr: etcdDown, wantErr: apierrors.IsInternalError},
		"timeout: the error, no get":            {createErr: apierrors.NewTimeoutError("slow", 1), wantErr: apierrors.IsTimeout},
		"create forbidden, node exists: use it": {exists: true, createErr: forbidden, wantGets: 1},
		"create forbidden, get forbidden: 403":  {createErr: forbidden, getErr: forbidden, wantGets: 1, wantErr: apierrors.IsForbidden},
		"create forbidden, no node: the 403":    {createErr: forbidden, wantGets: 1, wantErr: apierrors.IsForbidden},
		"exists, get fails: the get's error":    {exists: true, getErr: etcdDown, wantGets: 1, wantErr: apierrors.IsInternalError},
	} {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset()
			if tc.exists {
				client = fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
			}
			if tc.getErr != nil {
				client.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, tc.getErr
				})
			}
			if tc.createErr != nil {
				client.PrependReactor("create", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, tc.createErr
				})
			}
			got, created, err := Register(context.Background(), client, Config{Name: "n1"}.InitialNode(time.Now()))
			verbs := map[string]int{}
			for _, a := range client.Actions() {
				verbs[a.GetVerb()]++
			}
			if verbs["create"] != 1 || verbs["get"] != tc.wantGets || len(verbs) > 2 {
				t.Errorf("requests %v, want one create and %d get", verbs, tc.wantGets)
			}
			if created != tc.wantCreated {
				t.Errorf("created = %v", created)
			}
			switch {
			case tc.wantErr == nil && (err != nil || got == nil || got.Name != "n1"):
				t.Errorf("got %v, err %v", got, err)
			case tc.wantErr != nil && (err == nil || !tc.wantErr(err)):
				t.Errorf("err = %v", err)
			}
		})
	}
}

// TestStatusReportSpread: after its first report a node waits a random
// half to one and a half report periods before the next periodic one (as
// the kubelet does), so that nodes started together spread their reports;
// within that time an unchanged status is not written again.
func TestStatusReportSpread(t *testing.T) {
	const period = time.Minute
	seen := map[time.Duration]bool{}
	for i := range 20 {
		cfg := Config{Name: "spread"}
		client := fake.NewClientset(cfg.InitialNode(time.Now()))
		r := &StatusReporter{Client: client, Node: cfg, ReportFrequency: period}
		wrote, err := r.Sync(context.Background())
		if err != nil || !wrote {
			t.Fatalf("run %d: first sync wrote=%v err=%v, want a write", i, wrote, err)
		}
		if r.delay < -period/2 || r.delay >= period/2 {
			t.Fatalf("run %d: next report %s after the period, want within ±%s", i, r.delay, period/2)
		}
		seen[r.delay] = true
		if wrote, err := r.Sync(context.Background()); err != nil || wrote {
			t.Fatalf("run %d: an unchanged status was written again at once (err %v)", i, err)
		}
	}
	if len(seen) < 2 {
		t.Errorf("20 nodes got the same delay %v: not spread", seen)
	}
}

// An extended resource someone advertises on the node (a PATCH of
// status.capacity) stays in capacity and shows in allocatable, as with the
// kubelet's MachineInfo setter; one removed from capacity leaves
// allocatable. The scheduler's preemption specs advertise one so.
func TestSetStatusKeepsAdvertisedExtendedResources(t *testing.T) {
	c := Config{Name: "n", Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourcePods: resource.MustParse("110")}}
	n := &v1.Node{Status: v1.NodeStatus{
		Capacity:    v1.ResourceList{"example.com/dongle": resource.MustParse("4")},
		Allocatable: v1.ResourceList{"example.com/gone": resource.MustParse("1")},
	}}
	c.SetStatus(n, time.Now())
	for _, list := range []v1.ResourceList{n.Status.Capacity, n.Status.Allocatable} {
		if q := list["example.com/dongle"]; q.Value() != 4 {
			t.Errorf("example.com/dongle %v in %v, want 4 kept", q.String(), list)
		}
		if q := list[v1.ResourceCPU]; q.Value() != 2 {
			t.Errorf("cpu %v in %v, want ours, 2", q.String(), list)
		}
	}
	if _, ok := n.Status.Allocatable["example.com/gone"]; ok {
		t.Errorf("allocatable %v keeps example.com/gone, which capacity no longer has", n.Status.Allocatable)
	}
}
