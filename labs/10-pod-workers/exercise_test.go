package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/kubelet"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/pleg"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
	"k8s.io/utils/clock"

	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/labs/10-pod-workers/teachloop"
	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/plegruntime"
	"kubelet-labs/mycore/podworkers"
	"kubelet-labs/mylib/fakecri"
)

// The exercise (README, "Exercise — remove the gate"), in two parts.
//
// 1. withoutGate is the pod cache as this test hands it to the pod workers
// for its second run. Remove the gate here, not in mycore/podworkers: make
// its GetNewerThan return what the cache holds for the pod now, without
// waiting for the PLEG.
type withoutGate struct{ kubecontainer.Cache }

// GetNewerThan is what every sync of a pod worker calls first.
func (c withoutGate) GetNewerThan(id types.UID, minTime time.Time) (*kubecontainer.PodStatus, error) {
	// The gate: blocks until the PLEG has written a status of the pod
	// newer than minTime, the worker's last sync.
	return c.Cache.GetNewerThan(id, minTime)
}

// 2. Predict, for step 1 of the walk-through (a pod created, and an update
// right behind it, before the PLEG relists):
var answer = struct {
	// How many RunPodSandbox calls reach the runtime, with the workers'
	// real cache, and with withoutGate?
	WithGate, WithoutGate int
	// Without the gate, what does the runtime answer the second
	// RunPodSandbox? A gRPC code: OK, AlreadyExists, NotFound,
	// FailedPrecondition…
	SecondRunPodSandbox string
}{}

func TestExercise(t *testing.T) {
	testenv.Exercise(t)
	withGate := gateRun(t, func(c kubecontainer.Cache) kubecontainer.Cache { return c })
	noGate := gateRun(t, func(c kubecontainer.Cache) kubecontainer.Cache { return withoutGate{c} })

	if !noGate.syncedBeforeRelist {
		t.Errorf("withoutGate still waits: the update's sync ran only after the PLEG relisted. Make its GetNewerThan return the cache's entry at once (kubecontainer.Cache has Get)")
	}
	if answer.WithGate == 0 || answer.WithoutGate == 0 || answer.SecondRunPodSandbox == "" {
		t.Fatalf("you have not predicted yet: write answer.WithGate, answer.WithoutGate and answer.SecondRunPodSandbox in labs/10-pod-workers/exercise_test.go")
	}
	if answer.WithGate != withGate.sandboxCalls {
		t.Errorf("with the gate: you predicted %d RunPodSandbox call(s); the runtime got %d (%s)", answer.WithGate, withGate.sandboxCalls, withGate.answers())
	}
	if !noGate.syncedBeforeRelist {
		return // the rest is about the workers without a gate
	}
	if answer.WithoutGate != noGate.sandboxCalls {
		t.Errorf("without the gate: you predicted %d RunPodSandbox call(s); the runtime got %d (%s)", answer.WithoutGate, noGate.sandboxCalls, noGate.answers())
	}
	second := "none (there was no second call)"
	if len(noGate.codes) > 1 {
		second = noGate.codes[1]
	}
	if !strings.EqualFold(strings.TrimSpace(answer.SecondRunPodSandbox), second) {
		t.Errorf("without the gate: you predicted the runtime answers the second RunPodSandbox with %s; it answered %s", answer.SecondRunPodSandbox, second)
	}
}

// gateResult is what one run of step 1 did.
type gateResult struct {
	sandboxCalls       int
	codes              []string // the runtime's answer to each RunPodSandbox
	syncedBeforeRelist bool     // the update's sync ran before the PLEG relisted
}

func (r gateResult) answers() string { return "answered " + strings.Join(r.codes, ", ") }

// gateRun is step 1 of the walk-through on the real pod workers, the lab's
// syncer, the kubelet's PLEG and the mock: a pod created, then an update
// right behind it once the first sync made the sandbox and the container.
// The PLEG relists only when the test says (before the create, and once
// the update has been synced or 2 s after it), so "before the PLEG has seen the sandbox" is
// certain, not a matter of timing. cache wraps the cache the workers get.
func gateRun(t *testing.T, cache func(kubecontainer.Cache) kubecontainer.Cache) gateResult {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var res gateResult
	relisted := false
	srv, err := fakecri.Start(filepath.Join(shortDir(t), "cri.sock"), fakecri.WithImages(labruntime.BusyboxImage),
		fakecri.WithCallObserver(func(c fakecri.Call) {
			if c.Method == "RunPodSandbox" {
				mu.Lock()
				res.sandboxCalls++
				res.codes = append(res.codes, status.Code(c.Err).String())
				mu.Unlock()
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c, err := cri.Dial(ctx, srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	podCache := kubecontainer.NewCache()
	g := pleg.NewGenericPLEG(logr.Discard(), plegruntime.New(c), make(chan *pleg.PodLifecycleEvent, 1000),
		&pleg.RelistDuration{RelistPeriod: time.Second, RelistThreshold: time.Minute}, podCache, clock.RealClock{}).(*pleg.GenericPLEG)
	g.Relist() // the runtime is empty: the cache says so, up to now

	updateSyncs := 0
	workers, err := podworkers.New(podworkers.Options{
		Syncer: &teachloop.Syncer{CRI: c}, Cache: cache(podCache),
		// no retry, no resync within the test: one create, one update
		ResyncInterval: time.Hour, BackOffPeriod: time.Hour,
		OnEvent: func(e podworkers.Event) {
			if e.Kind == podworkers.Sync && e.UpdateType == kubetypes.SyncPodUpdate {
				mu.Lock()
				updateSyncs++
				res.syncedBeforeRelist = res.syncedBeforeRelist || !relisted
				mu.Unlock()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer workers.Stop()

	pod := exercisePod()
	workers.UpdatePod(kubelet.UpdatePodOptions{UpdateType: kubetypes.SyncPodCreate, Pod: pod})
	testenv.PollTrue(t, "the pod's container running in the mock", 30*time.Second, func() bool {
		for _, ctr := range srv.Runtime().Snapshot().Containers {
			if ctr.State == "CONTAINER_RUNNING" {
				return true
			}
		}
		return false
	})
	labelled := pod.DeepCopy()
	labelled.Labels = map[string]string{"step": "2"} // kubectl label pod oneshot step=2
	workers.UpdatePod(kubelet.UpdatePodOptions{UpdateType: kubetypes.SyncPodUpdate, Pod: labelled})

	// A worker without the gate syncs at once; one with it waits for the
	// relist below, so this wait is the gated run's 2 s.
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		synced := updateSyncs > 0
		mu.Unlock()
		if synced {
			break
		}
	}
	mu.Lock()
	relisted = true
	mu.Unlock()
	g.Relist()
	testenv.PollTrue(t, "the update's sync", 30*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return updateSyncs > 0 })
	time.Sleep(200 * time.Millisecond) // let that sync finish its CRI calls
	mu.Lock()
	defer mu.Unlock()
	return res
}

func exercisePod() *v1.Pod {
	never := false
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "oneshot", Namespace: "default", UID: types.UID("exercise-oneshot")},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyNever, AutomountServiceAccountToken: &never,
			Containers: []v1.Container{{Name: "main", Image: labruntime.BusyboxImage, Command: []string{"sh", "-c", "echo working; while true; do sleep 1; done"}}},
		},
	}
}

// shortDir is a folder for a unix socket, whose path must stay short.
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "lab10")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
