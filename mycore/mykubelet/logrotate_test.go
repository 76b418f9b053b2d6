package mykubelet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kubelet-labs/internal/testenv"
)

// TestContainerLogsAreRotated: a chatty pod on our node gets its log
// rotated by the kubelet itself, with no one calling RotateOnce — the
// folder a learner lists shows 0.log, gzipped older rotations and the
// newest one as it is, never more than ContainerLogMaxFiles files — and
// the node's defaults are the kubelet's.
func TestContainerLogsAreRotated(t *testing.T) {
	n := newNode(t, "logrot-node")
	ns := n.namespace(t)
	r := n.start(t, Options{ContainerLogMaxSize: 16 << 10, ContainerLogMaxFiles: 3, ContainerLogMonitorInterval: time.Second})
	if size, files := r.k.LogRotator().Policy(); size != 16<<10 || files != 3 {
		t.Fatalf("policy %d bytes, %d files; want the options' 16 KiB, 3", size, files)
	}
	line := "logrot-" + strings.Repeat("x", 500)
	p := n.createPod(t, ns, "chatty", 0, "while true; do echo "+line+"; echo "+line+"; sleep 0.01; done")
	n.runningPod(t, ns, "chatty")
	dir := filepath.Join(r.k.PodLogsDir(), ns+"_chatty_"+string(p.UID), "main")
	// Two rotations at least: the older one is gzipped.
	testenv.PollTrue(t, "a gzipped rotation in "+dir, patient, func() bool {
		gz, _ := filepath.Glob(filepath.Join(dir, "0.log.*.gz"))
		return len(gz) > 0
	})
	if !n.log.has("logs", "rotated "+ns+"/chatty/main", "ReopenContainerLog") {
		t.Errorf("no log line says the kubelet rotated chatty's log")
	}
	r.stop(t) // no rotation under way while we count
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	if len(names) > 3 || names[0] != "0.log" {
		t.Errorf("%s holds %v: want 0.log and at most 2 rotations", dir, names)
	}

	k, err := New(Options{NodeName: "logrot-defaults", Client: n.client, CRI: n.cri})
	if err != nil {
		t.Fatal(err)
	}
	k.workers.Stop() // New started them; this kubelet never runs
	if size, files := k.LogRotator().Policy(); size != 10<<20 || files != 5 {
		t.Errorf("default policy %d bytes, %d files; want the kubelet's 10 MiB, 5", size, files)
	}
}
