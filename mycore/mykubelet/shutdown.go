package mykubelet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	kubeletpkg "k8s.io/kubernetes/pkg/kubelet"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/mycore/kuberuntime"
)

// What graceful node shutdown writes into each pod it stops
// (nodeshutdown/nodeshutdown_manager.go:88-89, v1.36.3).
const (
	ShutdownReason  = "Terminated"
	ShutdownMessage = "Pod was terminated in response to imminent node shutdown."
)

// shutdown is the kubelet's graceful node shutdown
// (nodeshutdown_manager.go:130-200, one priority group): every pod is
// killed through its worker with grace min(its own, ShutdownGracePeriod)
// and a status func that makes it Failed, Terminated, with a
// DisruptionTarget condition; then we wait until every worker has finished
// (or grace + grace/2, at least 10 s, as killPodNow waits) and flush the
// statuses to the apiserver.
//
// ctx is the node's own context, still running: the PLEG must keep
// relisting (the workers wait on its cache) and the status manager
// posting while pods stop.
func (k *Kubelet) shutdown(ctx context.Context) {
	limit := int64(k.o.ShutdownGracePeriod.Seconds())
	pods := k.pods.GetPods() // static and regular pods; mirror pods are not in this list
	k.log("shutdown %d pod(s), grace min(their own, %ds), as graceful node shutdown does", len(pods), limit)

	var wg sync.WaitGroup
	for _, pod := range pods {
		grace := limit
		if g := pod.Spec.TerminationGracePeriodSeconds; g != nil && *g <= grace {
			grace = *g
		}
		done := make(chan struct{})
		k.workers.UpdatePod(kubeletpkg.UpdatePodOptions{Pod: pod, UpdateType: kubetypes.SyncPodKill,
			KillPodOptions: &kubeletpkg.KillPodOptions{
				CompletedCh: done, PodTerminationGracePeriodSecondsOverride: &grace,
				PodStatusFunc: func(st *v1.PodStatus) { markShutdown(pod, st) },
			}})
		wait := time.Duration(max(grace+grace/2, 10)) * time.Second
		wg.Go(func() {
			select {
			case <-done:
			case <-k.clock.After(wait):
				k.log("shutdown %s not stopped after %s: the runtime did not kill it in time", klog.KObj(pod), wait)
			case <-ctx.Done():
			}
		})
	}
	wg.Wait()
	n := k.status.Sync(ctx, true)
	k.log("shutdown every pod stopped; statuses flushed (%d were still waiting to be posted)", n)
}

// markShutdown is the status func of nodeshutdown_manager.go:153-167.
func markShutdown(pod *v1.Pod, st *v1.PodStatus) {
	if st.Phase != v1.PodSucceeded {
		st.Phase = v1.PodFailed
	}
	st.Message = ShutdownMessage
	st.Reason = ShutdownReason
	podutil.UpdatePodCondition(st, &v1.PodCondition{
		Type:               v1.DisruptionTarget,
		ObservedGeneration: podutil.CalculatePodConditionObservedGeneration(st, pod.Generation, v1.DisruptionTarget),
		Status:             v1.ConditionTrue,
		Reason:             v1.PodReasonTerminationByKubelet,
		Message:            ShutdownMessage,
	})
}

// RemoveAll stops whatever of this node still runs in the runtime (grace
// 1 s, as for a runtime-only pod) and removes every container, sandbox and
// log folder of it: what `crictl stopp` + `crictl rmp` would do, for this
// node only (NodeLabel). A kubelet never does this — its containers outlive
// it — but a lab that ends on Ctrl-C should leave nothing behind. Call it
// after Run returned.
func (k *Kubelet) RemoveAll(ctx context.Context) (kuberuntime.GCResult, error) {
	running, err := k.runtime.GetPods(ctx, false)
	if err != nil {
		return kuberuntime.GCResult{}, err
	}
	var errs []error
	one := int64(1)
	for _, rp := range running {
		if err := k.manager.KillPod(ctx, nil, *rp, &one); err != nil {
			errs = append(errs, fmt.Errorf("stopping %s/%s: %w", rp.Namespace, rp.Name, err))
		}
	}
	res, err := k.manager.GarbageCollect(ctx, kuberuntime.GCOptions{
		Policy: kuberuntime.DefaultGCPolicy, Pods: kuberuntime.PodsGone(func(types.UID) bool { return true }),
		AllSourcesReady: true, Selector: map[string]string{NodeLabel: k.o.NodeName},
	})
	return res, errors.Join(append(errs, err)...)
}
