package kuberuntime

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
)

// GracePeriod is the grace a container gets before any preStop hook or
// clamping: setTerminationGracePeriod (kuberuntime_container.go:1434-1453,
// v1.36.3) then the caller's override (:886-890). from says which field
// decided, for a learner to see: a short phrase naming it, e.g.
// "metadata.deletionGracePeriodSeconds".
//
// The first that applies wins:
//
//  1. the override, if the caller gives one (the pod workers pass the grace
//     they settled on; eviction passes its own) — from names "override";
//  2. else metadata.deletionGracePeriodSeconds — set by the apiserver when
//     the pod is deleted (kubectl delete --grace-period=N, or the spec's
//     value by default);
//  3. else, if spec.terminationGracePeriodSeconds is set and reason is
//     ReasonLivenessProbe (ReasonStartupProbe), the container's liveness
//     (startup) probe's own terminationGracePeriodSeconds, when that probe
//     sets one — from names the reason, e.g. "the LivenessProbe probe's
//     terminationGracePeriodSeconds";
//  4. else spec.terminationGracePeriodSeconds (30 s unless the pod says);
//  5. else MinimumGracePeriodSeconds — from says "minimum".
//
// c may be nil (no probe then).
//
//stage:kill-grace
func GracePeriod(pod *v1.Pod, c *v1.Container, reason KillReason, override *int64) (seconds int64, from string) {
	switch {
	case override != nil:
		return *override, "the caller's override"
	case pod.DeletionGracePeriodSeconds != nil:
		return *pod.DeletionGracePeriodSeconds, "metadata.deletionGracePeriodSeconds"
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		if p := probeOf(c, reason); p != nil && p.TerminationGracePeriodSeconds != nil {
			return *p.TerminationGracePeriodSeconds, fmt.Sprintf("the %s probe's terminationGracePeriodSeconds", reason)
		}
		return *pod.Spec.TerminationGracePeriodSeconds, "spec.terminationGracePeriodSeconds"
	}
	return MinimumGracePeriodSeconds, "the minimum (the pod sets no grace period)"
}

// probeOf is the probe whose failure is reason (nil for any other reason).
func probeOf(c *v1.Container, reason KillReason) *v1.Probe {
	switch {
	case c == nil:
		return nil
	case reason == ReasonLivenessProbe:
		return c.LivenessProbe
	case reason == ReasonStartupProbe:
		return c.StartupProbe
	}
	return nil
}

// stopTimeout is the timeout killContainer passes to CRI StopContainer —
// how long the runtime waits between the stop signal and SIGKILL — given
// the grace GracePeriod chose (kuberuntime_container.go:892-907, v1.36.3).
// Everything before the stop signal runs inside the grace period:
//
//  1. preStop, if not nil, runs the container's preStop hook, given the
//     grace left as its budget, and returns how long it ran. Run it only if
//     some grace is left (> 0); its time, in whole seconds (truncated, as
//     upstream's int64(Seconds())), comes off the grace (:893-895);
//  2. waitTurn, if not nil (a pod with sidecars), waits until it is this
//     container's turn to stop, at most the budget, and returns how long
//     it waited. The same: only if grace is left, whole seconds off
//     (:899-902);
//  3. whatever is left, never less than MinimumGracePeriodSeconds: "a
//     minimal shutdown window to avoid unnecessary SIGKILLs" (:905-907,
//     kuberuntime_manager.go:84).
//
//stage:kill-grace
func stopTimeout(grace int64, preStop, waitTurn func(budget int64) time.Duration) int64 {
	if preStop != nil && grace > 0 {
		grace -= int64(preStop(grace).Seconds())
	}
	if waitTurn != nil && grace > 0 {
		grace -= int64(waitTurn(grace).Seconds())
	}
	if grace < MinimumGracePeriodSeconds {
		grace = MinimumGracePeriodSeconds
	}
	return grace
}
