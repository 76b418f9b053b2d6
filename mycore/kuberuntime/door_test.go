package kuberuntime_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/journal"
	"kubelet-labs/mycore/kuberuntime"
	"kubelet-labs/mycore/plegruntime"
	"kubelet-labs/mylib/fakecri"
)

// Every CRI call the runtime manager makes is a journal.CRI entry on the
// lane of the pod it is about — the live view draws a pod's lane from
// them. A pod's life on the mock runtime: SyncPod creates it, a second
// SyncPod resizes its container in place, KillPod stops it and
// GarbageCollect removes it. The calls that change something are on the
// pod's lane with their latency and, for the terminal, their line; those
// that only read (lists, statuses) are entries too, with no line.
func TestEveryCRICallIsAJournalEntryOfItsPod(t *testing.T) {
	noLeaks(t)
	mock := fakecri.New(fakecri.WithImages("busybox"))
	t.Cleanup(mock.Close)
	c := cri.InProcess("mock", mock, mock)
	bus := journal.New(journal.Options{Node: "n1"})
	m := kuberuntime.New(c, kuberuntime.Options{PodLogsDir: t.TempDir(), Journal: bus})
	ctx := context.Background()

	pod := resizablePod("250m")
	status := func() *kubecontainer.PodStatus {
		t.Helper()
		r := plegruntime.New(c)
		p, err := r.GetPod(ctx, pod.UID)
		if err != nil {
			return &kubecontainer.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
		}
		st, err := r.GetPodStatus(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	sync := func(what string) {
		t.Helper()
		if r := m.SyncPod(ctx, pod, status(), kuberuntime.PodIPs{}, nil); r.Error() != nil {
			t.Fatalf("SyncPod (%s): %v", what, r.Error())
		}
	}
	sync("create")
	pod = resizablePod("500m") // more CPU: NotRequired, so in place
	sync("resize")

	st := status()
	running := kubecontainer.Pod{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	for _, s := range st.SandboxStatuses {
		running.Sandboxes = append(running.Sandboxes, &kubecontainer.Container{ID: kubecontainer.ContainerID{Type: "fakecri", ID: s.Id}})
	}
	for _, s := range st.ContainerStatuses {
		running.Containers = append(running.Containers, &kubecontainer.Container{ID: s.ID, Name: s.Name, State: s.State})
	}
	zero := int64(0)
	if err := m.KillPod(ctx, pod, running, &zero); err != nil {
		t.Fatal(err)
	}
	res, err := m.GarbageCollect(ctx, kuberuntime.GCOptions{
		Policy:          kuberuntime.DefaultGCPolicy,
		Pods:            kuberuntime.PodsGone(func(uid types.UID) bool { return uid == pod.UID }),
		AllSourcesReady: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Containers) != 1 || len(res.Sandboxes) != 1 {
		t.Fatalf("GarbageCollect removed %d containers and %d sandboxes, want 1 and 1", len(res.Containers), len(res.Sandboxes))
	}

	var cris []journal.Entry
	for _, e := range bus.Backlog() {
		if e.Kind == journal.CRI {
			cris = append(cris, e)
		}
	}
	lane := "door/web"
	var missing []string
	for _, want := range []struct {
		call, container, text string
	}{
		{"RunPodSandbox", "", "CRI RunPodSandbox door/web attempt 0 → "},
		{"CreateContainer", "app", ""},
		{"StartContainer", "app", "CRI CreateContainer + StartContainer web/app busybox (restartCount 0) → "},
		{"UpdateContainerResources", "app", "CRI UpdateContainerResources web/app "},
		{"StopContainer", "app", "  web/app stopped after "}, // announced before, with no latency yet
		{"StopPodSandbox", "", "CRI StopPodSandbox door/web "},
		{"RemoveContainer", "app", "CRI RemoveContainer web/app "},
		{"RemovePodSandbox", "", "CRI RemovePodSandbox door/web "},
	} {
		found := false
		for _, e := range cris {
			if e.Call == want.call && e.Pod == lane && e.UID == string(pod.UID) && e.Container == want.container &&
				!e.Failed && e.Took > 0 && strings.HasPrefix(e.Text, want.text) {
				found = true
			}
		}
		if !found {
			missing = append(missing, fmt.Sprintf("%s of %s container %q printing %q", want.call, lane, want.container, want.text))
		}
	}
	// A read is on the journal too, with its latency but no printed line.
	read := false
	for _, e := range cris {
		read = read || (e.Call == "ListContainers" && e.Text == "" && e.Pod == "")
	}
	if !read {
		missing = append(missing, "the collector's ListContainers (the node's, unprinted)")
	}
	if len(missing) > 0 {
		t.Errorf("no journal.CRI entry (with its latency, not failed) for:\n  %s\nthe CRI entries:\n%s", strings.Join(missing, "\n  "), describe(cris))
	}
}

// resizablePod is one container whose CPU limit may change in place.
func resizablePod(cpuLimit string) *v1.Pod {
	q := resource.MustParse
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "door", UID: "uid-door-web"},
		Spec: v1.PodSpec{DNSPolicy: v1.DNSDefault, Containers: []v1.Container{{
			Name: "app", Image: "busybox", Command: []string{"sh", "-c", politeScript},
			Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: q("100m"), v1.ResourceMemory: q("32Mi")},
				Limits:   v1.ResourceList{v1.ResourceCPU: q(cpuLimit), v1.ResourceMemory: q("32Mi")},
			},
			ResizePolicy: []v1.ContainerResizePolicy{{ResourceName: v1.ResourceCPU, RestartPolicy: v1.NotRequired}},
		}}},
	}
}

func describe(es []journal.Entry) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "  %s pod=%q container=%q failed=%t text=%q\n", e.Call, e.Pod, e.Container, e.Failed, e.Text)
	}
	return b.String()
}
