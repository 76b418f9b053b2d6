package node_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/node"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestJoinReadyThenRejoinWithoutBootstrap: the first Join bootstraps and
// registers; the second finds valid credentials and the existing Node.
func TestJoinReadyThenRejoinWithoutBootstrap(t *testing.T) {
	cfg := testenv.AdminConfig(t)
	admin := testenv.AdminClient(t)
	t.Setenv(state.EnvVar, t.TempDir())
	ctx := context.Background()
	const name = "t-join-node"

	var lines []string
	j, err := node.Join(ctx, node.JoinOptions{Admin: cfg, Dir: testenv.NodeDir(t, name), Name: name, Lab: "test-join",
		Log: func(f string, a ...any) { lines = append(lines, f) }})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	if j.Bootstrap.Skipped || len(lines) == 0 {
		t.Errorf("first join: skipped=%v, %d log lines", j.Bootstrap.Skipped, len(lines))
	}
	n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.UID == "" || n.UID != j.Node.UID {
		t.Errorf("Joined.Node uid %q, apiserver %q", j.Node.UID, n.UID)
	}
	if c := node.GetCondition(&n.Status, v1.NodeReady); c == nil || c.Status != v1.ConditionTrue {
		t.Errorf("Ready condition %+v", c)
	}
	tainted := false
	for _, taint := range n.Spec.Taints {
		tainted = tainted || taint.MatchTaint(&node.NoRuntimeTaint)
	}
	if n.Labels[node.LabLabel] != "test-join" || !tainted {
		t.Errorf("labels %v taints %v", n.Labels, n.Spec.Taints)
	}
	// The client is the node's own: it may read its Node, not list secrets.
	if _, err := j.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Errorf("node client reads its own Node: %v", err)
	}
	if _, err := j.Client.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); err == nil {
		t.Errorf("node client listed secrets: it is not the node's identity")
	}
	if want, _ := state.Path("nodes", name); j.Dir != want {
		t.Errorf("Dir %s, want %s", j.Dir, want)
	}
	j.Stop()
	j.Stop() // idempotent

	again, err := node.Join(ctx, node.JoinOptions{Admin: cfg, Dir: testenv.NodeDir(t, name), Name: name, Lab: "test-join"})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Stop()
	if !again.Bootstrap.Skipped || again.Node.UID != n.UID {
		t.Errorf("rejoin: skipped=%v uid %s (was %s)", again.Bootstrap.Skipped, again.Node.UID, n.UID)
	}
}

// TestJoinRejectsBadNameBeforeAnyFolder: nothing is created on disk for a
// name the apiserver would refuse anyway.
func TestJoinRejectsBadNameBeforeAnyFolder(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(state.EnvVar, dir)
	for _, bad := range []string{"Lab_Node", "", "../escape", "a/b"} {
		if _, err := node.Join(context.Background(), node.JoinOptions{Admin: &rest.Config{Host: "https://127.0.0.1:1"}, Name: bad}); err == nil {
			t.Errorf("Join(%q) succeeded", bad)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "nodes")); !os.IsNotExist(err) {
		t.Errorf("a nodes folder was created: %v", err)
	}
}
