package kuberuntime

import (
	"fmt"
	"strings"

	grpcstatus "google.golang.org/grpc/status"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	_ "k8s.io/kubernetes/pkg/apis/core/install" // v1.Pod's kind in legacyscheme, for GenerateContainerRef
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

// recordContainerEvent is recordContainerEvent (kuberuntime_container.go:85):
// an event about one container, referring to it by field path
// (spec.containers{NAME}), so kubectl describe shows it under the pod and
// an e2e test finds it by involvedObject.fieldPath. The container's ID is
// replaced by its name in the message, as upstream does, so repeats of
// the same event are counted rather than stored one by one. No recorder
// (Options.Recorder nil): nothing is recorded.
func (m *Manager) recordContainerEvent(pod *v1.Pod, c *v1.Container, containerID, eventType, reason, format string, args ...any) {
	if m.recorder == nil || pod == nil || c == nil {
		return
	}
	ref, err := kubecontainer.GenerateContainerRef(pod, c)
	if err != nil {
		m.log("  no event %s for %s/%s: %v", reason, pod.Name, c.Name, err)
		return
	}
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	if containerID != "" {
		msg = strings.ReplaceAll(msg, containerID, c.Name)
	}
	m.recorder.Event(ref, eventType, reason, msg)
}

// Recorder is the event recorder the Manager records container events
// with (nil: none).
func (m *Manager) Recorder() record.EventRecorder { return m.recorder }

// grpcMessage is the message of a CRI error without its gRPC code, as
// upstream puts it in events (grpcstatus.FromError(err).Message()).
func grpcMessage(err error) string {
	if s, ok := grpcstatus.FromError(err); ok {
		return s.Message()
	}
	return err.Error()
}
