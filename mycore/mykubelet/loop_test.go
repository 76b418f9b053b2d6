package mykubelet

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubeletlabels "k8s.io/kubelet/pkg/types"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/internal/testenv"
)

// TestConfigOpsReachThePodWorkers follows one pod through the ops the sync
// loop dispatches from the apiserver (syncLoopIteration): ADD (created,
// bound to the node) starts it; UPDATE (its image changed) restarts its
// container with the new image; DELETE (a graceful delete: only a
// deletionTimestamp) stops it with SIGTERM and lets the status manager
// delete the object. (Even a forced delete reaches the node as a DELETE
// first, then a REMOVE: TestRemoveStopsThePod sends a REMOVE alone.)
func TestConfigOpsReachThePodWorkers(t *testing.T) {
	// No housekeeping during the test: what happens is the ops' doing.
	n := startNode(t, "t-ops", Options{HousekeepingPeriod: time.Hour})
	ns := n.namespace(t)
	ctx := context.Background()

	// ADD: the pod runs, and the apiserver shows the container the mock runs.
	n.createPod(t, ns, "web", 30, "sleep infinity")
	p := n.runningPod(t, ns, "web")
	first := runtimeID(p.Status.ContainerStatuses[0])
	if st := n.containerState(t, first); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING || st.Image.GetImage() != mockBusyboxImage {
		t.Fatalf("ADD: the mock's container %s is %s with image %s, want RUNNING with %s", first, st.State, st.Image.GetImage(), mockBusyboxImage)
	}
	if !n.log.has("config", "ADD", ns+"/web") {
		t.Errorf("no log line of the ADD")
	}

	// UPDATE: a new image is a changed container spec: the container is
	// replaced by one with the new image (restartCount 1).
	patch := fmt.Sprintf(`{"spec":{"containers":[{"name":"main","image":%q}]}}`, mockBusybox2Image)
	if _, err := n.admin.CoreV1().Pods(ns).Patch(ctx, "web", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.PollNil(t, "web's container replaced by one with the new image", patient, func() error {
		var err error
		if p, err = n.getPod(ns, "web"); err != nil {
			return err
		}
		cs := p.Status.ContainerStatuses[0]
		if cs.State.Running == nil || runtimeID(cs) == first || cs.RestartCount != 1 {
			return fmt.Errorf("container %s running %v restartCount %d", runtimeID(cs), cs.State.Running != nil, cs.RestartCount)
		}
		return nil
	})
	second := runtimeID(p.Status.ContainerStatuses[0])
	if st := n.containerState(t, second); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING || st.Image.GetImage() != mockBusybox2Image {
		t.Errorf("UPDATE: the new container is %s with image %s, want RUNNING with %s", st.State, st.Image.GetImage(), mockBusybox2Image)
	}
	if st := n.containerState(t, first); st.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("UPDATE: the old container is %s, want EXITED", st.State)
	}
	if !n.log.has("config", "UPDATE", ns+"/web") {
		t.Errorf("no log line of the UPDATE")
	}

	// DELETE: the container gets SIGTERM (sh without a trap dies of it:
	// 143), and once nothing runs the node deletes the object for good.
	if err := n.admin.CoreV1().Pods(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.PollNil(t, "web deleted from the apiserver", patient, func() error {
		_, err := n.getPod(ns, "web")
		return notFound(err)
	})
	if st := n.containerState(t, second); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 143 {
		t.Errorf("DELETE: the container is %s, exit code %d; want EXITED, 143 (SIGTERM)", st.State, st.ExitCode)
	}
	if !n.log.has("config", "DELETE", ns+"/web") {
		t.Errorf("no log line of the DELETE")
	}
}

// TestRemoveStopsThePod: REMOVE is the pod source saying a pod is gone
// without a graceful delete first — its deletion reached the node only as
// "not there any more" (a watch that missed the update, a relist). The
// source is Options.Updates here, so the REMOVE comes alone, and there is
// no housekeeping (which would stop the pod too, as one nobody wants): only
// the REMOVE can stop it.
func TestRemoveStopsThePod(t *testing.T) {
	n := newNode(t, "t-remove")
	ns := n.namespace(t)
	updates := make(chan kubetypes.PodUpdate, 1)
	n.start(t, Options{Updates: updates, HousekeepingPeriod: time.Hour})
	p := n.createPod(t, ns, "gone", 30, "sleep infinity")
	updates <- kubetypes.PodUpdate{Op: kubetypes.ADD, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{p}}
	id := runtimeID(n.runningPod(t, ns, "gone").Status.ContainerStatuses[0])

	zero := int64(0)
	if err := n.admin.CoreV1().Pods(ns).Delete(context.Background(), "gone", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	updates <- kubetypes.PodUpdate{Op: kubetypes.REMOVE, Source: kubetypes.ApiserverSource, Pods: []*v1.Pod{p}}
	testenv.PollNil(t, "gone's container stopped", patient, func() error {
		if st := n.containerState(t, id); st.State != runtimeapi.ContainerState_CONTAINER_EXITED {
			return fmt.Errorf("container %s is %s", id, st.State)
		}
		return nil
	})
	if st := n.containerState(t, id); st.ExitCode != 143 {
		t.Errorf("the container exited %d, want 143 (SIGTERM: stopped, not killed)", st.ExitCode)
	}
}

// TestDeleteAPodThatNeverStarted: a pod whose volume cannot be set up (its
// ConfigMap does not exist) never gets a sandbox; deleted, it has nothing
// to stop, and the node lets it go at once. The runtime answers "pod
// sandboxes not found" when asked for it, which SyncTerminatingPod takes as
// an empty pod, as upstream does (kubelet.go:2343-2352) — not as an error
// that its worker would retry for ever, the pod Terminating for good.
func TestDeleteAPodThatNeverStarted(t *testing.T) {
	n := newNode(t, "t-never-started")
	n.start(t, Options{PodsDir: filepath.Join(n.dir, "pods")})
	ns := n.namespace(t)
	ctx := context.Background()
	grace := int64(30)
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "stuck", Namespace: ns},
		Spec: v1.PodSpec{
			NodeName: n.name, TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken: new(bool),
			Containers: []v1.Container{{Name: "main", Image: mockBusyboxImage, Command: []string{"sleep", "infinity"},
				VolumeMounts: []v1.VolumeMount{{Name: "config", MountPath: "/config"}}}},
			Volumes: []v1.Volume{{Name: "config", VolumeSource: v1.VolumeSource{
				ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "not-there"}}}}},
		},
	}
	p, err := n.admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testenv.PollNil(t, "stuck's volume refused", patient, func() error {
		if !n.log.has("not-there") {
			return fmt.Errorf("no line about the missing ConfigMap yet")
		}
		return nil
	})
	sbs, err := n.cri.Pods(ctx, map[string]string{kubeletlabels.KubernetesPodUIDLabel: string(p.UID)})
	if err != nil || len(sbs) != 0 {
		t.Fatalf("the runtime has %d sandbox(es) of stuck (%v), want none: its volume was never set up", len(sbs), err)
	}

	if err := n.admin.CoreV1().Pods(ns).Delete(ctx, "stuck", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.PollNil(t, "stuck deleted from the apiserver by the node", patient, func() error {
		_, err := n.getPod(ns, "stuck")
		return notFound(err)
	})
	if n.log.has("sandboxes not found") {
		t.Errorf("the node logged the runtime's 'pod sandboxes not found' as a failure:\n%s", n.log)
	}
}
