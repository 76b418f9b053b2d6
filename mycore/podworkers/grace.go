package podworkers

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/kubelet"
)

// EffectiveGracePeriod is how many seconds a terminating pod gets, given
// the grace period it already has (current, 0 = none yet), the pod and a
// kill request's options. The rules are calculateEffectiveGracePeriod's
// (pod_workers.go:1009-1040):
//
//   - a grace period only ever decreases: a later, longer request is ignored;
//   - the apiserver's DeletionGracePeriodSeconds (set by a graceful delete)
//     and the kill request's override both count, the smaller wins;
//   - with neither, the pod's spec.terminationGracePeriodSeconds is used;
//   - the result is never below 1 second (a 0 from `--grace-period=0
//     --force` still gives the containers one second).
//
// shortened reports that an existing grace period was made shorter, which
// cancels a SyncTerminatingPod running with the longer one.
func EffectiveGracePeriod(current int64, pod *v1.Pod, opts *kubelet.KillPodOptions) (grace int64, shortened bool) {
	grace = current
	overridden := false
	lower := func(v *int64) {
		if v != nil && (grace == 0 || *v < grace) {
			grace, overridden = *v, true
		}
	}
	if pod != nil {
		lower(pod.DeletionGracePeriodSeconds) // the apiserver's word (graceful delete)
	}
	if opts != nil {
		lower(opts.PodTerminationGracePeriodSecondsOverride) // eviction, kubelet shutdown
	}
	if !overridden && grace == 0 && pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	if grace < 1 {
		grace = 1
	}
	return grace, current != 0 && current != grace
}
