package harness

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
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

// TestSolvedIsLab18sAndBuildsFromAPatchedCopy: SOLVED=1 is lab 18's
// exercise solved, so NODE=01 with it is refused before anything starts;
// and the solved lab 18 is built from a copy of the checkout with
// solutions/18-mykubelet.patch applied, the checkout itself untouched.
func TestSolvedIsLab18sAndBuildsFromAPatchedCopy(t *testing.T) {
	rt := Runtime{Sock: "/run/test/containerd.sock"}
	l := &Layout{Module: t.TempDir(), BinDir: t.TempDir()}
	_, err := l.StartCluster(context.Background(), ClusterSpec{Node: NodeRealKubelet, Solved: true, Nodes: []NodeSpec{{Name: "n-1", Runtime: rt}}, RunDir: t.TempDir()}, io.Discard)
	if want := "SOLVED=1 is lab 18's exercise solved: it needs NODE=18"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("SOLVED=1 NODE=01: %v, want an error that starts %q", err, want)
	}

	repo, err := filepath.Abs("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	// the state folder inside a git checkout, as .labs/ is by default
	outer := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", outer).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	l = &Layout{Repo: repo, Dir: filepath.Join(outer, ".labs", "conformance")}
	dir, err := l.solvedCopy("mykubelet-solved", "18-mykubelet.patch")
	if err != nil {
		t.Fatal(err)
	}
	const file = "mycore/mykubelet/deadline.go"
	solved, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	mine, err := os.ReadFile(filepath.Join(repo, file))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(solved), "k.clock.Since(st.StartTime.Time)") {
		t.Errorf("%s in the solved copy does not measure from the start time: the patch was not applied", file)
	}
	if bytes.Equal(solved, mine) {
		t.Errorf("%s: the solved copy is the checkout's", file)
	}
}
