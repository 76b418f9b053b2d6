package kuberuntime

import (
	"context"
	"fmt"
	"strings"
	"time"

	grpcstatus "google.golang.org/grpc/status"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	_ "k8s.io/kubernetes/pkg/apis/core/install" // v1.Pod's kind in legacyscheme, for GenerateContainerRef
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/events"
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

// ensureImageWithEvents is EnsureImage with the image manager's events
// (pkg/kubelet/images/image_manager.go:243-260, :355, :374): Pulled when
// the runtime has the image — in the words of the
// KubeletEnsureSecretPulledImages feature, beta and on in 1.36, whose
// check our node does not make: every image is local here — else Pulling,
// then Pulled or Failed.
func (m *Manager) ensureImageWithEvents(ctx context.Context, pod *v1.Pod, c *v1.Container) error {
	ok, err := m.cri.HasImage(ctx, c.Image)
	if err == nil && ok {
		m.recordContainerEvent(pod, c, "", v1.EventTypeNormal, events.PulledImage, "Container image %q already present on machine and can be accessed by the pod", c.Image)
		return nil
	}
	if err == nil {
		m.recordContainerEvent(pod, c, "", v1.EventTypeNormal, events.PullingImage, "Pulling image %q", c.Image)
		start := time.Now()
		if err = m.EnsureImage(ctx, c.Image); err == nil {
			m.recordContainerEvent(pod, c, "", v1.EventTypeNormal, events.PulledImage, "Successfully pulled image %q in %v", c.Image, time.Since(start).Round(time.Millisecond))
			return nil
		}
	}
	m.recordContainerEvent(pod, c, "", v1.EventTypeWarning, events.FailedToPullImage, "Failed to pull image %q: %v", c.Image, grpcMessage(err))
	return err
}
