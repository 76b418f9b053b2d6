package fakecri

import (
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// next returns the next event or fails after patient.
func next(t *testing.T, ch <-chan *runtimeapi.ContainerEventResponse) *runtimeapi.ContainerEventResponse {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("event channel closed")
		}
		return ev
	case <-time.After(patient):
		t.Fatal("no event")
		return nil
	}
}

func TestEventsFollowTheLifecycle(t *testing.T) {
	r := newRuntime(t)
	ch, cancel := r.SubscribeEvents()
	defer cancel()

	sb := runPod(t, r, podConfig("ev"))
	id := createStart(t, r, sb, ctrConfig("c", "sh", "-c", "sleep 0.05; exit 2"))
	waitExited(t, r, id)
	if _, err := r.RemovePodSandbox(tctx(t), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	type want struct {
		id  string
		typ runtimeapi.ContainerEventType
	}
	wants := []want{
		{sb, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT},
		{sb, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT},
		{id, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT},
		{id, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT},
		{id, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT},
		{sb, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT},
		{id, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT},
		{sb, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT},
	}
	var last int64
	for i, w := range wants {
		ev := next(t, ch)
		if ev.ContainerId != w.id || ev.ContainerEventType != w.typ {
			t.Fatalf("event %d: got %s %.8s, want %s %.8s", i, ev.ContainerEventType, ev.ContainerId, w.typ, w.id)
		}
		// The evented PLEG drops events without sandbox metadata.
		if ev.PodSandboxStatus.GetMetadata().GetUid() != "uid-ev" || ev.CreatedAt < last {
			t.Fatalf("event %d: sandbox status %v created %d", i, ev.PodSandboxStatus, ev.CreatedAt)
		}
		last = ev.CreatedAt
		if w.typ == runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT && w.id == id {
			if len(ev.ContainersStatuses) != 1 || ev.ContainersStatuses[0].ExitCode != 2 {
				t.Fatalf("stopped event statuses %v", ev.ContainersStatuses)
			}
		}
	}
}

func TestSlowSubscriberIsCutOff(t *testing.T) {
	r := newRuntime(t)
	ch, cancel := r.SubscribeEvents()
	defer cancel()
	fast, cancelFast := r.SubscribeEvents()
	defer cancelFast()
	sb := runPod(t, r, podConfig("flood"))
	for i := 0; i < eventBuffer; i++ { // 2 sandbox events + 1024 more overflow the buffer
		id := create(t, r, sb, ctrConfig("c"+string(rune('a'+i%26))+string(rune('a'+i/26))))
		if _, err := r.RemoveContainer(tctx(t), &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
			t.Fatal(err)
		}
		for len(fast) > 0 { // keep the other subscriber drained
			<-fast
		}
	}
	n := 0
	for range ch {
		n++
	}
	if n != eventBuffer {
		t.Fatalf("lagging subscriber got %d events before the cut, want %d", n, eventBuffer)
	}
	// The drained subscriber is still connected.
	runPod(t, r, podConfig("after"))
	next(t, fast)
}
