package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kubelet-labs/internal/critest"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/mykubelet"
)

// The exercise: give our kubelet an emptyDir (README, Exercise). This test
// runs the lab's node on containerd 2.2 with a pod of two containers that
// share the volume "cache": writer writes /cache/msg, reader reads it. The
// file must be in the node's folder while the pod runs, and gone once the
// node has removed the pod (Ctrl-C: the graceful shutdown, then the
// garbage collection of everything of the node).
func TestExercise(t *testing.T) {
	testenv.Exercise(t)
	critest.Require(t, slices.Contains(critest.Flavours(), "2.2") || !critest.InCI(), "containerd 2.2 is not under test (LABS_CONTAINERD)")
	rt := critest.ContainerdFlavour(t, "2.2")
	const node = "t18-emptydir"
	lab := startNode(t, node, "containerd-2.2", rt.Endpoint)
	crc := critest.Dial(t, rt)
	admin := testenv.AdminClient(t)
	ns := testenv.Namespace(t, admin, "lab18-exercise")

	const msg = "written by the writer container"
	shared := []v1.VolumeMount{{Name: "cache", MountPath: "/cache"}}
	pod := create(t, admin, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "share", Namespace: ns},
		Spec: v1.PodSpec{
			NodeName: node,
			// sleep as PID 1 ignores SIGTERM: no need to wait long for the SIGKILL
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Volumes:                       []v1.Volume{{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
			Containers: []v1.Container{
				// mkdir -p: without the volume, writer still has a /cache of
				// its own, and the test can say what the reader saw.
				{Name: "writer", Image: rt.BusyboxImage, VolumeMounts: shared,
					Command: []string{"sh", "-c", "mkdir -p /cache && echo '" + msg + "' > /cache/msg && exec sleep 3600"}},
				{Name: "reader", Image: rt.BusyboxImage, VolumeMounts: shared, Command: []string{"sleep", "3600"}},
			},
		},
	})
	running := waitPod(t, admin, ns, pod.Name, "with both containers running", func(p *v1.Pod) bool {
		n := 0
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running != nil {
				n++
			}
		}
		return n == 2
	})
	readerID := ""
	for _, cs := range running.Status.ContainerStatuses {
		if cs.Name == "reader" {
			readerID = strings.TrimPrefix(cs.ContainerID, "containerd://")
		}
	}

	// The reader's view, through the runtime (kubectl exec would go the same way).
	ctx := context.Background()
	testenv.PollNil(t, "container reader to see the file writer wrote into the volume", 15*time.Second, func() error {
		resp, err := crc.Exec(ctx, readerID, []string{"cat", "/cache/msg"}, 10*time.Second)
		if err != nil {
			return err
		}
		if seen := strings.TrimSpace(string(resp.Stdout) + string(resp.Stderr)); resp.ExitCode != 0 || seen != msg {
			return fmt.Errorf("in container reader, cat /cache/msg said %q (exit %d), want %q: is the emptyDir's folder mounted into every container that names it (runtimeapi.Mount in ContainerConfig)?", seen, resp.ExitCode, msg)
		}
		return nil
	})

	// On the node: a folder of the pod, in the node's state folder.
	var onNode []string
	_ = filepath.WalkDir(lab.L.node.Dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "msg" && strings.Contains(p, string(pod.UID)) {
			onNode = append(onNode, p)
		}
		return nil
	})
	if len(onNode) != 1 {
		t.Fatalf("files msg in a folder named after the pod's UID %s under the node's folder %s: %q, want one (the volume's folder, e.g. pods/UID/volumes/kubernetes.io~empty-dir/cache)", pod.UID, lab.L.node.Dir, onNode)
	}
	t.Logf("the volume on the node: %s", filepath.Dir(onNode[0]))

	// Ctrl-C: every pod stopped, then everything of the node removed.
	lab.Stop()
	if _, err := os.Stat(onNode[0]); err == nil {
		t.Errorf("%s is still there after the node removed the pod: the garbage collector (GarbageCollect) must remove the pod's folder with it", onNode[0])
	}
	left, err := crc.Pods(ctx, map[string]string{mykubelet.NodeLabel: node})
	if err != nil || len(left) > 0 {
		t.Errorf("after Ctrl-C the runtime still has %d sandbox(es) of %s (%v)", len(left), node, err)
	}
}
