package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/events"
	utilexec "k8s.io/utils/exec"

	"kubelet-labs/mycore/cri"
)

// runPreStop is executePreStopHook (kuberuntime_container.go:781-806): run
// the container's preStop hook, but never longer than the grace period,
// and return how long it took — the caller subtracts that from the grace,
// because the hook runs inside it: `kubectl delete --grace-period=30` means
// 30 s for hook and shutdown together.
//
// A failing hook is logged, recorded as a FailedPreStopHook event, and
// the kill goes on. Upstream runs the hook in a goroutine and stops
// waiting for it after the grace period, leaving the goroutine behind;
// here the hook's context ends with the grace period instead, so ExecSync
// returns and nothing is left running.
func (m *Manager) runPreStop(ctx context.Context, pod *v1.Pod, id kubecontainer.ContainerID, c *v1.Container, grace int64) time.Duration {
	budget := time.Duration(grace) * time.Second
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	m.log("preStop hook of %s/%s %s: running, at most %ds", pod.Name, c.Name, cri.ShortID(id.ID), grace)
	start := time.Now()
	h := c.Lifecycle.PreStop
	var err error
	switch {
	case h.Exec != nil:
		// lifecycle/handlers.go:83 passes timeout 0 (none); ours is the
		// grace period, so the runtime ends the hook when it runs out.
		var stdout, stderr []byte
		stdout, stderr, err = m.cri.ExecSync(ctx, podAbout(pod).of(c.Name), id.ID, h.Exec.Command, budget)
		if exit := (utilexec.CodeExitError{}); errors.As(err, &exit) {
			err = fmt.Errorf("exit code %d: %s%s", exit.ExitStatus(), stdout, stderr)
		}
	case h.Sleep != nil:
		// runSleepHandler (lifecycle/handlers.go:113)
		t := time.NewTimer(time.Duration(h.Sleep.Seconds) * time.Second)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			err = fmt.Errorf("sleep %ds did not finish within the grace period", h.Sleep.Seconds)
		}
	default:
		// httpGet: upstream's handler runner (hooks.go), to the pod's IP.
		var msg string
		if msg, err = m.hooks.Run(withAbout(ctx, podAbout(pod).of(c.Name)), id, pod, c, h); err != nil && msg != "" {
			err = errors.New(msg)
		}
	}
	took := time.Since(start)
	if err != nil {
		m.log("  preStop hook of %s/%s failed after %.3fs: %v", pod.Name, c.Name, took.Seconds(), err)
		// Not the error in the event: it may hold secrets (:795).
		m.recordContainerEvent(pod, c, id.ID, v1.EventTypeWarning, events.FailedPreStopHook, "PreStopHook failed")
	} else {
		m.log("  preStop hook of %s/%s done in %.3fs", pod.Name, c.Name, took.Seconds())
	}
	return took
}
