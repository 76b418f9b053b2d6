package fakenode

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/kubernetes/pkg/kubelet"
)

// TestNodeOSLeavesVarLogContainersAlone: the kubelet's start-up MkdirAll of
// /var/log/containers succeeds without creating it (a learner may not), and
// every other folder is made as usual.
func TestNodeOSLeavesVarLogContainersAlone(t *testing.T) {
	_, existed := os.Stat(kubelet.ContainerLogsDir)
	if err := (nodeOS{}).MkdirAll(kubelet.ContainerLogsDir, 0o755); err != nil {
		t.Fatalf("MkdirAll(%s) = %v, want nil", kubelet.ContainerLogsDir, err)
	}
	if _, err := os.Stat(kubelet.ContainerLogsDir); existed != nil && err == nil {
		t.Errorf("%s was created", kubelet.ContainerLogsDir)
	}
	dir := filepath.Join(t.TempDir(), "a", "b")
	if err := (nodeOS{}).MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		t.Errorf("MkdirAll(%s): %v %v, want a folder", dir, info, err)
	}
}
