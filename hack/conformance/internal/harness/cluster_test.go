package harness

import (
	"context"
	"io"
	"strings"
	"testing"
)

// TestRealKubeletNodesNeedAContainerdEach: lab 01 may be a full cluster's
// node now, but two of them on one containerd would stop each other's pods
// (the real kubelet stops every pod of its runtime it does not run), so
// StartCluster refuses before it builds or starts anything. Lab 18's nodes
// may share one, as before. One lab 01 node in a full cluster gets past
// the checks, to the build (which this Layout, with no module, fails at
// once: nothing is built or started).
func TestRealKubeletNodesNeedAContainerdEach(t *testing.T) {
	rt := Runtime{Sock: "/run/test/containerd.sock"}
	two := []NodeSpec{{Name: "n-1", Runtime: rt}, {Name: "n-2", Runtime: rt}}
	l := &Layout{Module: t.TempDir(), BinDir: t.TempDir()}
	_, err := l.StartCluster(context.Background(), ClusterSpec{Node: NodeRealKubelet, Full: true, Nodes: two, RunDir: t.TempDir()}, io.Discard)
	want := "NODE=01: nodes n-1 and n-2 would share containerd /run/test/containerd.sock, and the real kubelet stops every pod of its runtime it does not run"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("two lab 01 nodes on one containerd: %v, want an error that starts %q", err, want)
	}
	_, err = l.StartCluster(context.Background(), ClusterSpec{Node: NodeRealKubelet, Full: true, Nodes: two[:1], RunDir: t.TempDir()}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "go.mod") {
		t.Errorf("one lab 01 node in a full cluster: %v, want it past the node checks, to the build (no go.mod here)", err)
	}
}
