package kuberuntime

import (
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
)

// terminationOrdering is kuberuntime_termination_order.go (v1.36.3) in
// compact form: the order a pod with sidecars (init containers with
// restartPolicy Always) stops in. Main containers stop at once; each
// sidecar waits until every main container, and the sidecar declared after
// it, has stopped — sidecars stop in reverse order of their start, so a
// logging or proxy sidecar outlives the containers that use it. A sidecar
// never waits beyond its grace period.
type terminationOrdering struct {
	mu sync.Mutex
	// terminated[name] is closed when that container has stopped (or was
	// not running at all).
	terminated map[string]chan struct{}
	// prereqs[name] are the channels a container waits on before its stop.
	prereqs map[string][]chan struct{}
}

// hasSidecars is types.HasRestartableInitContainer (pkg/kubelet/types),
// nil-safe: a pod restored from labels has no init containers.
func hasSidecars(pod *v1.Pod) bool {
	if pod == nil {
		return false
	}
	return slices.ContainsFunc(pod.Spec.InitContainers, func(c v1.Container) bool { return podutil.IsRestartableInitContainer(&c) })
}

// newTerminationOrdering is newTerminationOrdering (:43-95).
func newTerminationOrdering(pod *v1.Pod, running []string) *terminationOrdering {
	o := &terminationOrdering{terminated: map[string]chan struct{}{}, prereqs: map[string][]chan struct{}{}}
	channel := func(name string) chan struct{} {
		ch := make(chan struct{})
		if !slices.Contains(running, name) {
			close(ch) // nothing to wait for
		}
		o.terminated[name] = ch
		return ch
	}
	var mains []chan struct{}
	for _, c := range pod.Spec.Containers {
		mains = append(mains, channel(c.Name))
	}
	later := "" // the sidecar declared after this one
	for i := len(pod.Spec.InitContainers) - 1; i >= 0; i-- {
		ic := &pod.Spec.InitContainers[i]
		channel(ic.Name)
		if !podutil.IsRestartableInitContainer(ic) {
			continue
		}
		o.prereqs[ic.Name] = append(o.prereqs[ic.Name], mains...)
		if later != "" {
			o.prereqs[ic.Name] = append(o.prereqs[ic.Name], o.terminated[later])
		}
		later = ic.Name
	}
	return o
}

// waitForTurn is waitForTurn (:99-118): block until every prerequisite
// has stopped or the grace period is over; return how long it waited.
func (o *terminationOrdering) waitForTurn(name string, grace int64) time.Duration {
	if grace <= 0 {
		return 0
	}
	start := time.Now()
	timer := time.NewTimer(time.Duration(grace) * time.Second)
	defer timer.Stop()
	for _, ch := range o.prereqs[name] {
		select {
		case <-ch:
		case <-timer.C:
			return time.Since(start)
		}
	}
	return time.Since(start)
}

// containerTerminated is containerTerminated (:121-128).
func (o *terminationOrdering) containerTerminated(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ch, ok := o.terminated[name]; ok {
		close(ch)
		delete(o.terminated, name)
	}
}
