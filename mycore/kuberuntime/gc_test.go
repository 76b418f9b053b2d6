package kuberuntime_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/kuberuntime"
	"kubelet-labs/mycore/plegruntime"
)

// GarbageCollect on a pod's life: a restarted container leaves one dead
// instance, which the default policy keeps (kubectl logs --previous) until
// a newer one dies; a stopped pod keeps its newest sandbox and dead
// containers until the pod state provider says it is over (for the
// kubelet's pod workers: deleted and terminated, whether or not its object
// is still in the apiserver); then containers, sandbox and log folder all
// go.
func TestGarbageCollect(t *testing.T) {
	eachRuntime(t, func(t *testing.T, e *killEnv) {
		ctx := context.Background()
		pod := killPod("gc", 2, ctr("app", politeScript))
		sandboxID, ids := e.start(t, pod)
		gone := false
		gc := func(allSourcesReady bool) kuberuntime.GCResult {
			t.Helper()
			res, err := e.m.GarbageCollect(ctx, kuberuntime.GCOptions{
				Policy:          kuberuntime.DefaultGCPolicy,
				Pods:            kuberuntime.PodsGone(func(uid types.UID) bool { return uid == pod.UID && gone }),
				AllSourcesReady: allSourcesReady,
				Selector:        map[string]string{"io.kubernetes.pod.uid": string(pod.UID)},
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("GC (pod gone=%t, all sources ready=%t): removed %d containers, %d sandboxes, %d log folders",
				gone, allSourcesReady, len(res.Containers), len(res.Sandboxes), len(res.LogDirs))
			return res
		}
		kill := func(id string) {
			t.Helper()
			if r := e.m.KillContainer(ctx, pod, kubecontainer.ContainerID{ID: id}, "app", kuberuntime.ReasonUnknown, nil); r.Error != nil {
				t.Fatal(r.Message)
			}
		}
		// restart is what SyncPod does for a dead container: a new instance,
		// restart count from the last one's annotation.
		restart := func() string {
			t.Helper()
			r := plegruntime.New(e.cri)
			p, err := r.GetPod(ctx, pod.UID)
			if err != nil {
				t.Fatal(err)
			}
			st, err := r.GetPodStatus(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			id, err := e.m.StartContainer(ctx, sandboxID, sandboxConfig(t, e.m, pod), pod, &pod.Spec.Containers[0], st, kuberuntime.PodIPs{})
			if err != nil {
				t.Fatal(err)
			}
			e.waitLog(t, id, "ready", "app")
			return id
		}

		first := ids["app"]
		kill(first)
		second := restart()
		if res := gc(true); len(res.Containers)+len(res.Sandboxes)+len(res.LogDirs) != 0 {
			t.Errorf("one dead instance of a living pod must stay; GC removed %+v", res)
		}
		kill(second)
		third := restart()
		firstLog := e.status(t, first).LogPath
		if res := gc(true); len(res.Containers) != 1 || res.Containers[0] != first {
			t.Errorf("GC removed %v, want only the oldest dead instance %s", res.Containers, first)
		}
		if _, err := e.cri.ContainerStatus(ctx, first); !cri.IsNotFound(err) {
			t.Errorf("the oldest instance is still in the runtime: %v", err)
		}
		if _, err := os.Stat(firstLog); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("its log %s is still there: %v", firstLog, err)
		}
		if st := e.status(t, second); st.State != runtimeapi.ContainerState_CONTAINER_EXITED {
			t.Errorf("the newest dead instance is %s, want it kept (EXITED)", st.State)
		}

		// The pod is killed: everything stops, nothing is removed yet.
		if err := e.m.KillPod(ctx, pod, e.runningPod(t, pod.UID), nil); err != nil {
			t.Fatal(err)
		}
		if res := gc(true); len(res.Sandboxes) != 0 || len(res.Containers) != 1 || res.Containers[0] != second {
			t.Errorf("GC after KillPod removed %+v, want only %s (the newest dead instance is now the third) and not the sandbox of a living pod", res, second)
		}
		// Over, but not every pod source seen yet: a pod that looks gone
		// may just not be listed yet, so its containers stay.
		gone = true
		if res := gc(false); len(res.Containers) != 0 {
			t.Errorf("GC removed containers of a gone pod before all sources were ready: %+v", res)
		}
		res := gc(true)
		if len(res.Sandboxes) != 1 || res.Sandboxes[0] != sandboxID || len(res.LogDirs) != 1 {
			t.Errorf("GC of the gone pod removed %+v, want its sandbox and log folder", res)
		}
		for _, id := range []string{second, third} {
			if _, err := e.cri.ContainerStatus(ctx, id); !cri.IsNotFound(err) {
				t.Errorf("container %s is still in the runtime: %v", id, err)
			}
		}
		if left, err := e.cri.Pods(ctx, map[string]string{"io.kubernetes.pod.uid": string(pod.UID)}); err != nil || len(left) != 0 {
			t.Errorf("sandboxes left: %v %v", left, err)
		}
		dir := filepath.Join(e.logDir, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("pod log folder %s is still there: %v", dir, err)
		}
	})
}

// Without a PodStateProvider there is no telling what is over: an error,
// not a guess.
func TestGarbageCollectNeedsPodState(t *testing.T) {
	m := kuberuntime.New(nil, kuberuntime.Options{})
	if _, err := m.GarbageCollect(context.Background(), kuberuntime.GCOptions{Policy: kuberuntime.DefaultGCPolicy}); err == nil {
		t.Error("GarbageCollect without Pods succeeded")
	}
}
