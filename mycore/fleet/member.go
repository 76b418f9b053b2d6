package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/lease"
	"kubelet-labs/mycore/mykubelet"
	"kubelet-labs/mycore/node"
	"kubelet-labs/mylib/fakecri"
)

// member is one node of the fleet: its mock runtime, its kubelet, its
// Node configuration.
type member struct {
	f       *Fleet
	name    string
	conn    nodeConn // shared with the other nodes of its group
	cfg     node.Config
	mock    *fakecri.Runtime
	kubelet *mykubelet.Kubelet
	logs    string // this node's pod logs folder
	log     func(string, ...any)
}

// podCIDR gives node i a /24 of its own in 10.64.0.0/10, so pod IPs are
// unique across the fleet (each mock runtime hands out its own range).
func podCIDR(i int) string { return fmt.Sprintf("10.%d.%d.0/24", 64+i/256, i%256) }

func newMember(f *Fleet, i int, name string, conn nodeConn, updates <-chan kubetypes.PodUpdate, events record.EventRecorder,
	getNode func(context.Context, string) (*v1.Node, error)) (*member, error) {
	o := f.o
	m := &member{f: f, name: name, conn: conn, logs: filepath.Join(o.Dir, name)}
	if o.NodeLog != nil {
		m.log = o.NodeLog(name)
	}
	m.mock = fakecri.New(fakecri.WithPodCIDR(podCIDR(i)))
	runtime := cri.InProcess(name, m.mock, m.mock)
	// Each node asks its own runtime, as a kubelet does; the mock answers
	// in this process, at once. The machine's facts (Config.Host nil) are
	// read once for the whole fleet: node.ThisHost.
	rv, err := node.ContainerRuntimeVersion(context.Background(), runtime.Runtime)
	if err != nil {
		m.mock.Close()
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	m.cfg = node.Config{
		Name:                    name,
		Labels:                  map[string]string{node.LabLabel: o.Lab},
		Capacity:                o.Capacity,
		ContainerRuntimeVersion: rv,
	}
	k, err := mykubelet.New(mykubelet.Options{
		NodeName: name, Client: conn.client, CRI: runtime,
		PodLogsDir: m.logs, HostIPs: []string{"127.0.0.1"},
		RelistPeriod: o.RelistPeriod, HousekeepingPeriod: o.HousekeepingPeriod,
		Updates: updates, Log: m.log,
		// a thousand nodes' GET before each status PATCH were a third of
		// the fleet's requests (issue 23); see status.Options.ReadLastWrite
		StatusReadLastWrite: true,
		// and waits for one of the fleet's turns to write, then sends the
		// newest status it has (status.WriteTurns)
		StatusTurns: f.turns,
		// one of the fleet's few broadcasters, not one per node (events.go)
		Events:     events,
		ClusterDNS: o.ClusterDNS, ClusterDomain: o.ClusterDomain,
		// admission reads the Node from the fleet's one Node informer, not
		// from an informer (a watch) per node
		GetNode: func(ctx context.Context) (*v1.Node, error) { return getNode(ctx, name) },
		// and until the informer has its Node (or while the Node cannot
		// be registered), from the Node it registers, as the kubelet does
		InitialNode: func() *v1.Node { return m.cfg.InitialNode(time.Now()) },
	})
	if err != nil {
		m.mock.Close()
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	m.kubelet = k
	return m, nil
}

// register creates the Node (or finds it registered before), retrying
// until ctx ends with the kubelet's back-off, 100 ms doubling to 7 s and
// then every 7 s: registerWithAPIServer never gives up
// (pkg/kubelet/kubelet_node_status.go:52-67, v1.36.3). (Not
// wait.ExponentialBackoff: its Backoff ends once the cap is reached —
// delay() sets Steps to 0 — so a node refused for 13 s stopped trying.)
// Each attempt holds one of places (the fleet's RegisterParallelism)
// while its create is in flight, and only then: during the back-off the
// place is free for other nodes. tried is called after the first attempt,
// whatever its outcome.
func (m *member) register(ctx context.Context, places chan struct{}, tried func()) error {
	ctx = asNode(ctx, m.name)
	step := 100 * time.Millisecond
	for {
		select {
		case places <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		_, _, err := node.Register(ctx, m.conn.client, m.cfg.InitialNode(time.Now()))
		<-places
		tried()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		}
		m.f.log("register %s: %v (retrying in %s)", m.name, err, step)
		t := time.NewTimer(step)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		step = min(2*step, 7*time.Second)
	}
}

// runHeartbeats renews the node's Lease (the kubelet's lease controller)
// and keeps its status current, until ctx ends.
func (m *member) runHeartbeats(ctx context.Context, get func(context.Context, string) (*v1.Node, error)) {
	ctx = asNode(ctx, m.name)
	ctl, _, err := lease.NewController(ctx, lease.Config{
		Client: m.conn.heartbeat, NodeName: m.name, LeaseDurationSeconds: m.f.o.LeaseDurationSeconds,
		// A thousand nodes time out together on a busy apiserver: read
		// the Lease after a lost answer rather than PUT into a 409.
		ReadAfterUnknownUpdate: true,
	})
	if err != nil { // the durations were checked in New
		m.f.log("lease %s: %v", m.name, err)
		return
	}
	reporterClient, err := m.conn.heartbeat.forNode(m.name)
	if err != nil {
		m.f.log("node status %s: %v", m.name, err)
		return
	}
	reporter := &node.StatusReporter{
		Client: reporterClient, Node: m.cfg, UpdateFrequency: m.f.o.StatusUpdateFrequency, Get: get,
		Log: func(format string, args ...any) { m.f.log(m.name+": "+format, args...) },
	}
	done := make(chan struct{})
	go func() { defer close(done); ctl.Run(ctx) }()
	// The reporter reads the Node from the informer: wait until it is
	// there rather than log a "not found" per node at start-up.
	_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := get(ctx, m.name)
		return err == nil, nil
	})
	reporter.Run(ctx)
	<-done
}

// runKubelet runs the node's kubelet until ctx ends.
func (m *member) runKubelet(ctx context.Context) {
	if err := m.kubelet.Run(asNode(ctx, m.name)); err != nil {
		m.f.log("kubelet %s: %v", m.name, err)
	}
}

// close ends the mock runtime (its containers die with it) and removes
// the pod logs the node wrote. Called after the kubelet has stopped.
func (m *member) close() {
	m.mock.Close()
	os.RemoveAll(m.logs)
}
