package node

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// TestRegisterOnlyOnNotFound: only NotFound leads to Create.
func TestRegisterOnlyOnNotFound(t *testing.T) {
	gr := schema.GroupResource{Resource: "nodes"}
	for name, tc := range map[string]struct {
		getErr      error
		exists      bool
		createErr   error
		wantCreate  bool
		wantCreated bool
		wantErr     bool
	}{
		"not found → create":           {getErr: apierrors.NewNotFound(gr, "n1"), wantCreate: true, wantCreated: true},
		"exists → no create":           {exists: true},
		"500 → error, no create":       {getErr: apierrors.NewInternalError(errors.New("etcd down")), wantErr: true},
		"403 → error, no create":       {getErr: apierrors.NewForbidden(gr, "n1", errors.New("no")), wantErr: true},
		"timeout → error, no create":   {getErr: apierrors.NewTimeoutError("slow", 1), wantErr: true},
		"lost the race → use theirs":   {getErr: apierrors.NewNotFound(gr, "n1"), createErr: apierrors.NewAlreadyExists(gr, "n1"), wantCreate: true},
		"create forbidden → the error": {getErr: apierrors.NewNotFound(gr, "n1"), createErr: apierrors.NewForbidden(gr, "n1", errors.New("no")), wantCreate: true, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset()
			if tc.exists || tc.createErr != nil && apierrors.IsAlreadyExists(tc.createErr) {
				client = fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
			}
			gets := 0
			client.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				gets++
				if gets == 1 && tc.getErr != nil {
					return true, nil, tc.getErr
				}
				return false, nil, nil
			})
			if tc.createErr != nil {
				client.PrependReactor("create", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, tc.createErr
				})
			}
			_, created, err := Register(context.Background(), client, Config{Name: "n1"}.InitialNode(time.Now()))
			creates := 0
			for _, a := range client.Actions() {
				if a.GetVerb() == "create" {
					creates++
				}
			}
			if (creates > 0) != tc.wantCreate || created != tc.wantCreated || (err != nil) != tc.wantErr {
				t.Errorf("creates=%d created=%v err=%v", creates, created, err)
			}
		})
	}
}
