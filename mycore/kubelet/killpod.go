package kubelet

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"kubelet-labs/mycore/cri"
)

// killPod stops the pod's containers in parallel, then its sandboxes
// (killPodWithSyncResult, kuberuntime_manager.go:1953). grace, if set,
// overrides the pod's own; never under 2 s (minimumGracePeriodInSeconds).
func (k *Kubelet) killPod(ctx context.Context, pod *v1.Pod, rp kubecontainer.Pod, grace *int64) error {
	g := int64(30)
	switch {
	case grace != nil:
		g = *grace
	case pod != nil && pod.DeletionGracePeriodSeconds != nil:
		g = *pod.DeletionGracePeriodSeconds
	case pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil:
		g = *pod.Spec.TerminationGracePeriodSeconds
	}
	g = max(g, 2)
	c := k.o.CRI
	var wg sync.WaitGroup
	errs := make([]error, len(rp.Containers))
	for i, ct := range rp.Containers {
		wg.Go(func() {
			start := time.Now()
			errs[i] = c.StopContainer(ctx, ct.ID.ID, time.Duration(g)*time.Second)
			if errs[i] == nil {
				k.log("CRI StopContainer %s %s timeout=%ds: stopped in %s", ct.Name, short(ct.ID.ID), g, time.Since(start).Round(10*time.Millisecond))
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	for _, sb := range rp.Sandboxes {
		if err := c.Runtime.StopPodSandbox(c.Context(ctx), sb.ID.ID); err != nil && !cri.IsNotFound(err) {
			return fmt.Errorf("StopPodSandbox %s: %w", short(sb.ID.ID), err)
		}
		k.log("CRI StopPodSandbox %s/%s %s", rp.Namespace, rp.Name, short(sb.ID.ID))
	}
	return nil
}
