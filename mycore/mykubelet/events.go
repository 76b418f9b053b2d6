package mykubelet

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/core/install" // the core API in legacyscheme, for event references
)

// nodeRecorder is the node's event recorder, as makeEventRecorder
// (cmd/kubelet/app/server.go:586-600) makes it: a broadcaster whose
// recorder stamps each event with source kubelet/NODE and whose sink
// writes it to the apiserver as the node — the Node authorizer's
// system:node role may create and patch events. The broadcaster
// aggregates and rate-limits repeats (client-go's EventCorrelator), so a
// crash-looping container does not flood the API.
//
// The kubelet makes it once for the life of the process; ours exists
// while Run runs (start, stop), so a Kubelet that is built and never run,
// or a cleanup after Run that still stops containers, leaves no goroutine
// and logs no "broadcaster already stopped": events outside Run are
// dropped.
type nodeRecorder struct {
	client   kubernetes.Interface
	nodeName string

	mu sync.RWMutex
	b  record.EventBroadcaster
	r  record.EventRecorder
}

var _ record.EventRecorder = (*nodeRecorder)(nil)

func (n *nodeRecorder) start() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.b = record.NewBroadcaster()
	n.r = n.b.NewRecorder(legacyscheme.Scheme, v1.EventSource{Component: "kubelet", Host: n.nodeName})
	n.b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: n.client.CoreV1().Events("")})
}

// stop ends the broadcaster once the events recorded so far are sent.
func (n *nodeRecorder) stop() {
	n.mu.Lock()
	b := n.b
	n.b, n.r = nil, nil
	n.mu.Unlock()
	if b != nil {
		b.Shutdown()
	}
}

func (n *nodeRecorder) with(f func(record.EventRecorder)) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.r != nil {
		f(n.r)
	}
}

func (n *nodeRecorder) Event(o runtime.Object, eventtype, reason, message string) {
	n.with(func(r record.EventRecorder) { r.Event(o, eventtype, reason, message) })
}

func (n *nodeRecorder) Eventf(o runtime.Object, eventtype, reason, format string, args ...any) {
	n.with(func(r record.EventRecorder) { r.Eventf(o, eventtype, reason, format, args...) })
}

func (n *nodeRecorder) AnnotatedEventf(o runtime.Object, annotations map[string]string, eventtype, reason, format string, args ...any) {
	n.with(func(r record.EventRecorder) { r.AnnotatedEventf(o, annotations, eventtype, reason, format, args...) })
}
