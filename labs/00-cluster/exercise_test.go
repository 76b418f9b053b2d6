package main

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"kubelet-labs/internal/controlplane"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/lease"
	"kubelet-labs/mycore/node"
)

// The exercise: lab 00 started with --node-monitor-grace-period=8s, and
// nodes whose kubelet keeps running and renewing its Lease. Write your
// predictions here, then run
//
//	make check LAB=00 EXERCISE=1
//
// The test starts such a control plane and two nodes (the course's kubelet
// heartbeat, mycore/node: status loop plus the upstream lease controller)
// and watches them for 40 s.
var answer = struct {
	// A kubelet with the default nodeLeaseDurationSeconds=40 renews its
	// Lease every 10 s. Does its node go Ready=Unknown (kubectl: NotReady)
	// although the kubelet never stops? "yes" or "no".
	DefaultKubeletGoesUnknown string
	// Leave the grace period at 8 s: which nodeLeaseDurationSeconds (a
	// kubelet setting, in seconds) keeps the node Ready — with a margin, a
	// renewal may come late?
	NodeLeaseDurationSeconds int32
	// The cost: with your nodeLeaseDurationSeconds, how many times a minute
	// does one node write its Lease? (Each write goes through the apiserver
	// into etcd; a cluster has that many per node.)
	LeaseWritesPerMinute int
}{
	DefaultKubeletGoesUnknown: "",
	NodeLeaseDurationSeconds:  0,
	LeaseWritesPerMinute:      0,
}

// exerciseGrace is the grace period of the exercise; exerciseWatch how long
// the nodes are watched.
const (
	exerciseGrace = 8 * time.Second
	exerciseWatch = 40 * time.Second
)

func TestExercise(t *testing.T) {
	testenv.Exercise(t)
	if answer.DefaultKubeletGoesUnknown != "yes" && answer.DefaultKubeletGoesUnknown != "no" {
		t.Fatalf(`answer.DefaultKubeletGoesUnknown is %q: predict first, "yes" or "no" (labs/00-cluster/exercise_test.go)`, answer.DefaultKubeletGoesUnknown)
	}
	if answer.NodeLeaseDurationSeconds <= 0 || answer.LeaseWritesPerMinute <= 0 {
		t.Fatalf("answer.NodeLeaseDurationSeconds is %d and answer.LeaseWritesPerMinute %d: predict first, both above 0 (labs/00-cluster/exercise_test.go)",
			answer.NodeLeaseDurationSeconds, answer.LeaseWritesPerMinute)
	}

	cp := testenv.OwnControlPlane(t, exerciseGrace)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg, err := cp.AdminConfig()
	if err != nil {
		t.Fatal(err)
	}
	admin := kubernetes.NewForConfigOrDie(cfg)

	nodes := []*watchedNode{
		{name: "ex00-default", leaseSeconds: 40},
		{name: "ex00-yours", leaseSeconds: answer.NodeLeaseDurationSeconds},
	}
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() { n.run(ctx, t, cp, admin) })
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	def, yours := nodes[0], nodes[1]
	t.Logf("grace %s, watched %s:\n  %s\n  %s", exerciseGrace, exerciseWatch, def, yours)

	if got := yesNo(def.unknown > 0); got != answer.DefaultKubeletGoesUnknown {
		t.Errorf("DefaultKubeletGoesUnknown: you predicted %q; it was %q — %s", answer.DefaultKubeletGoesUnknown, got, def)
	}
	if yours.unknown > 0 {
		t.Errorf("NodeLeaseDurationSeconds=%d: the node still went Ready=Unknown — %s; the renew interval must stay well below the 8 s grace",
			answer.NodeLeaseDurationSeconds, yours)
	}
	perMinute := float64(yours.writes) * float64(time.Minute) / float64(exerciseWatch)
	if tolerance := math.Max(2, 0.2*perMinute); math.Abs(float64(answer.LeaseWritesPerMinute)-perMinute) > tolerance {
		t.Errorf("LeaseWritesPerMinute: you predicted %d; the node wrote its Lease %d times in %s, %.0f a minute",
			answer.LeaseWritesPerMinute, yours.writes, exerciseWatch, perMinute)
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// watchedNode is one node of the exercise and what was seen of it.
type watchedNode struct {
	name         string
	leaseSeconds int32
	renew        time.Duration

	mu      sync.Mutex
	writes  int // Lease writes during the watch
	unknown int // times Ready left True during the watch
	first   time.Duration
}

func (n *watchedNode) String() string {
	first := ""
	if n.unknown > 0 {
		first = fmt.Sprintf(", the first time %.1fs after the node was Ready", n.first.Seconds())
	}
	return fmt.Sprintf("node %s (nodeLeaseDurationSeconds=%d, renewed every %s): %d Lease writes, Ready=Unknown %d times%s",
		n.name, n.leaseSeconds, n.renew, n.writes, n.unknown, first)
}

// run registers the node, starts its heartbeat (status and Lease, as a
// kubelet does), and counts for exerciseWatch its Lease writes and the
// times the node lifecycle controller set Ready to Unknown.
func (n *watchedNode) run(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, admin kubernetes.Interface) {
	cfg, err := cp.AdminConfig() // the heartbeat's identity does not matter to the controller
	if err != nil {
		t.Error(err)
		return
	}
	var start time.Time
	agent, err := node.NewAgent(cfg, node.AgentOptions{
		Node:                 node.Config{Name: n.name, Taints: []v1.Taint{node.NoRuntimeTaint}},
		LeaseDurationSeconds: n.leaseSeconds,
		OnRenewal: func(r lease.Renewal) {
			n.mu.Lock()
			defer n.mu.Unlock()
			if r.Err == nil && r.Status < 300 && !start.IsZero() && time.Since(start) < exerciseWatch {
				n.writes++
			}
		},
	})
	if err != nil {
		t.Errorf("node %s: %v", n.name, err)
		return
	}
	n.renew = agent.RenewInterval
	if _, _, err := agent.Register(ctx); err != nil {
		t.Errorf("register %s: %v", n.name, err)
		return
	}
	w, err := admin.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + n.name})
	if err != nil {
		t.Error(err)
		return
	}
	defer w.Stop()
	if err := agent.Start(ctx); err != nil { // posts Ready=True first
		t.Errorf("node %s: %v", n.name, err)
		return
	}
	defer agent.Stop()
	n.mu.Lock()
	start = time.Now()
	n.mu.Unlock()
	end := time.After(exerciseWatch)
	ready := true
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Errorf("node %s: the watch ended early", n.name)
				return
			}
			nd, isNode := ev.Object.(*v1.Node)
			if !isNode || ev.Type == watch.Deleted {
				continue
			}
			c := node.GetCondition(&nd.Status, v1.NodeReady)
			now := c != nil && c.Status == v1.ConditionTrue
			if ready && !now && c != nil {
				n.mu.Lock()
				if n.unknown == 0 {
					n.first = time.Since(start)
				}
				n.unknown++
				n.mu.Unlock()
			}
			if c != nil {
				ready = now
			}
		case <-end:
			return
		case <-ctx.Done():
			t.Errorf("node %s: %v", n.name, ctx.Err())
			return
		}
	}
}
