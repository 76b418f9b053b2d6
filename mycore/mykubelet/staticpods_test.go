package mykubelet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/internal/testenv"
)

// put writes a manifest under a dot-name, then renames it into place: the
// file source never reads it half-written.
func (n *testNode) put(t *testing.T, file, body string) {
	t.Helper()
	tmp := filepath.Join(n.manifests, "."+file)
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(n.manifests, file)); err != nil {
		t.Fatal(err)
	}
}

// runningMirror is the mirror pod of a static pod once it shows the
// static pod Running with container main running: the status only the
// node can have posted.
func (n *testNode) runningMirror(t *testing.T, name string) (*v1.Pod, error) {
	p, err := n.admin.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if !kubetypes.IsMirrorPod(p) {
		return nil, fmt.Errorf("pod %s is not a mirror pod (annotations %v)", name, p.Annotations)
	}
	if p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
		return nil, fmt.Errorf("mirror pod %s: phase %s, %d container status(es)", p.UID, p.Status.Phase, len(p.Status.ContainerStatuses))
	}
	return p, nil
}

const webManifest = `apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: main
    image: ` + mockBusyboxImage + `
    command: [sleep, infinity]
`

// TestStaticPod: a manifest dropped in the folder runs on the node and
// shows in the apiserver as a mirror pod carrying its status; `kubectl
// delete` of the mirror pod makes the node create it again without
// touching the containers; removing the manifest stops the containers and
// deletes the mirror pod. The periodic read of the folder is the
// kubelet's 20 s: everything here happens through inotify.
func TestStaticPod(t *testing.T) {
	n := startNode(t, "t-static", Options{})
	const mirrorName = "web-t-static"
	// A bad manifest is logged and skipped; the node goes on.
	n.put(t, "bad.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: bad}\nspec: {containers: [{name: Bad_Name, image: x}]}\n")

	n.put(t, "web.yaml", webManifest)
	var mirror *v1.Pod
	took := testenv.PollNil(t, "the mirror pod, Running", patient, func() error {
		var err error
		mirror, err = n.runningMirror(t, mirrorName)
		return err
	})
	t.Logf("manifest written → mirror pod Running in the apiserver: %s", took.Round(time.Millisecond))
	reported := false
	for _, line := range strings.Split(n.log.String(), "\n") {
		reported = reported || (strings.Contains(line, "invalid pod") && strings.Contains(line, "Bad_Name") && strings.Contains(line, "bad.yaml"))
	}
	if !reported {
		t.Errorf("no log line reports bad.yaml and why")
	}

	// The mirror pod is the node's: owned by its Node, bound to it, with
	// the hash of the static pod it mirrors.
	staticUID := mirror.Annotations[kubetypes.ConfigHashAnnotationKey]
	if mirror.Annotations[kubetypes.ConfigMirrorAnnotationKey] != staticUID || staticUID == "" {
		t.Errorf("mirror annotations %v: want config.mirror = config.hash", mirror.Annotations)
	}
	if mirror.Spec.NodeName != n.name || len(mirror.OwnerReferences) != 1 || mirror.OwnerReferences[0].Kind != "Node" || mirror.OwnerReferences[0].Name != n.name {
		t.Errorf("mirror pod: nodeName %q, ownerReferences %v; want bound to and owned by Node %s", mirror.Spec.NodeName, mirror.OwnerReferences, n.name)
	}
	if string(mirror.UID) == staticUID {
		t.Errorf("the mirror pod has the static pod's UID %s: it should be the apiserver's own", staticUID)
	}
	// The status is the runtime's: the container the mock runs.
	cs := n.containers(t, staticUID)
	if len(cs) != 1 || cs[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("the mock runs %d container(s) for static pod %s: %v", len(cs), staticUID, cs)
	}
	if got := mirror.Status.ContainerStatuses[0].ContainerID; !strings.HasSuffix(got, cs[0].Id) {
		t.Errorf("mirror status shows container %s, the mock runs %s", got, cs[0].Id)
	}

	// kubectl delete of the mirror pod: the node makes a new one, and the
	// static pod runs on untouched (same container, no restart).
	deleted := time.Now()
	if out, errOut, code := testenv.Kubectl(t, "", "delete", "pod", mirrorName, "--namespace", "default"); code != 0 {
		t.Fatalf("kubectl delete: exit %d: %s%s", code, out, errOut)
	}
	var mirror2 *v1.Pod
	took = testenv.PollNil(t, "a new mirror pod, Running", patient, func() error {
		var err error
		mirror2, err = n.runningMirror(t, mirrorName)
		if err == nil && mirror2.UID == mirror.UID {
			return fmt.Errorf("still the old mirror pod %s", mirror.UID)
		}
		return err
	})
	t.Logf("kubectl delete of the mirror pod → a new mirror pod Running: %s after kubectl started (%s after it returned)",
		time.Since(deleted).Round(time.Millisecond), took.Round(time.Millisecond))
	c2 := mirror2.Status.ContainerStatuses[0]
	if !strings.HasSuffix(c2.ContainerID, cs[0].Id) || c2.RestartCount != 0 {
		t.Errorf("after the mirror pod was deleted: container %s restartCount %d; want the same container %s, never restarted", c2.ContainerID, c2.RestartCount, cs[0].Id)
	}

	// A forced delete (grace 0: the apiserver removes the object at once,
	// the node only sees it gone): made again too.
	forced := time.Now()
	if out, errOut, code := testenv.Kubectl(t, "", "delete", "pod", mirrorName, "--namespace", "default", "--grace-period=0", "--force"); code != 0 {
		t.Fatalf("kubectl delete --force: exit %d: %s%s", code, out, errOut)
	}
	testenv.PollNil(t, "a mirror pod made again after a forced delete", patient, func() error {
		p, err := n.admin.CoreV1().Pods("default").Get(context.Background(), mirrorName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.UID == mirror2.UID {
			return fmt.Errorf("still mirror pod %s", p.UID)
		}
		return nil
	})
	t.Logf("kubectl delete --grace-period=0 --force of the mirror pod → a new mirror pod: %s after kubectl started", time.Since(forced).Round(time.Millisecond))

	// The manifest edited: a new static pod (its UID is the hash of the
	// file), so the old one stops, the new one starts, and the mirror pod
	// is replaced by one with the new hash.
	edited := time.Now()
	n.put(t, "web.yaml", strings.Replace(webManifest, "[sleep, infinity]", "[sleep, '3600']", 1))
	var mirror3 *v1.Pod
	testenv.PollNil(t, "the mirror pod of the edited static pod, Running", patient, func() error {
		var err error
		mirror3, err = n.runningMirror(t, mirrorName)
		if err == nil && mirror3.Annotations[kubetypes.ConfigHashAnnotationKey] == staticUID {
			return errors.New("still the mirror pod of the old static pod")
		}
		return err
	})
	t.Logf("manifest edited → the new static pod's mirror pod Running: %s", time.Since(edited).Round(time.Millisecond))
	if got := mirror3.Spec.Containers[0].Command; len(got) != 2 || got[1] != "3600" {
		t.Errorf("new mirror pod's command %v, want the edited one", got)
	}
	testenv.PollNil(t, "the old static pod's containers stopped", patient, func() error {
		for _, c := range n.containers(t, staticUID) {
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return fmt.Errorf("container %s still runs", c.Id)
			}
		}
		return nil
	})
	staticUID = mirror3.Annotations[kubetypes.ConfigHashAnnotationKey]

	// The manifest removed: the containers stop and the mirror pod goes.
	removed := time.Now()
	if err := os.Remove(filepath.Join(n.manifests, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	testenv.PollNil(t, "the static pod's containers stopped", patient, func() error {
		for _, c := range n.containers(t, staticUID) {
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return fmt.Errorf("container %s still runs", c.Id)
			}
		}
		return nil
	})
	stopped := time.Since(removed)
	testenv.PollNil(t, "the mirror pod deleted", patient, func() error {
		_, err := n.admin.CoreV1().Pods("default").Get(context.Background(), mirrorName, metav1.GetOptions{})
		return notFound(err)
	})
	t.Logf("manifest removed → containers stopped %s, mirror pod gone %s", stopped.Round(time.Millisecond), time.Since(removed).Round(time.Millisecond))
}
