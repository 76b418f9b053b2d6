package mykubelet

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/core/install" // the core API in legacyscheme, for event references
)

// newEventRecorder is makeEventRecorder (cmd/kubelet/app/server.go:586-600):
// one broadcaster whose recorder stamps each event with source
// kubelet/NODE, and whose sink writes it to the apiserver as the node —
// the Node authorizer's system:node role may create and patch events. The
// broadcaster aggregates and rate-limits repeats (client-go's
// EventCorrelator) so a crash-looping container does not flood the API.
// start begins sending (Run), stop ends the broadcaster's goroutines.
func newEventRecorder(client kubernetes.Interface, nodeName string) (rec record.EventRecorder, start func(), stop func()) {
	b := record.NewBroadcaster()
	rec = b.NewRecorder(legacyscheme.Scheme, v1.EventSource{Component: "kubelet", Host: nodeName})
	start = func() {
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	}
	return rec, start, b.Shutdown
}
