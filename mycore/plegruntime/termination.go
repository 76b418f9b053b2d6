package plegruntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/logs"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/util/tail"
	"k8s.io/utils/buffer"
)

// The annotations the kubelet writes on every container (labels.go:39-40)
// and mycore/kuberuntime writes too: where the container writes its
// termination message, and whether its log may stand in for one.
const (
	terminationMessagePathAnnotation   = "io.kubernetes.container.terminationMessagePath"
	terminationMessagePolicyAnnotation = "io.kubernetes.container.terminationMessagePolicy"
)

// withTerminationMessage is the exited-container half of
// convertToKubeContainerStatus (kuberuntime_container.go:584-604): a
// container that exited gets its termination message appended to the
// runtime's message — the host file the kubelet mounted at
// terminationMessagePath (at most 4 KiB), or, with
// terminationMessagePolicy FallbackToLogsOnError, a container that failed
// and wrote nothing there, the last 80 lines (at most 2 KiB) of its log.
// A container that could not even start (ContainerCannotRun) has no log
// worth reading.
func withTerminationMessage(ctx context.Context, cs *kubecontainer.Status, s *runtimeapi.ContainerStatus) {
	if s.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		return
	}
	fallback := s.Annotations[terminationMessagePolicyAnnotation] == string(v1.TerminationMessageFallbackToLogsOnError) &&
		cs.ExitCode != 0 && cs.Reason != "ContainerCannotRun"
	msg, checkLogs := terminationMessage(s, s.Annotations[terminationMessagePathAnnotation], fallback)
	if checkLogs {
		msg = lastLogLines(ctx, s.GetLogPath())
	}
	if msg == "" {
		return
	}
	if cs.Message != "" {
		cs.Message += ": "
	}
	cs.Message += msg
}

// terminationMessage is getTerminationMessage (kuberuntime_container.go:549):
// the host side of the mount whose container path is path, read up to
// MaxContainerTerminationMessageLength from its end, and whether the log
// should be read instead.
func terminationMessage(s *runtimeapi.ContainerStatus, path string, fallback bool) (string, bool) {
	if path == "" {
		return "", fallback
	}
	path = filepath.Clean("/" + path) // volumeutil.MakeAbsolutePath on Linux
	for _, m := range s.Mounts {
		if m.ContainerPath != path {
			continue
		}
		data, _, err := tail.ReadAtMost(m.HostPath, kubecontainer.MaxContainerTerminationMessageLength)
		if err != nil {
			if os.IsNotExist(err) {
				return "", fallback
			}
			return fmt.Sprintf("Error on reading termination log %s: %v", m.HostPath, err), false
		}
		return string(data), fallback && len(data) == 0
	}
	return "", fallback
}

// lastLogLines is readLastStringFromContainerLogs (kuberuntime_container.go:574):
// the container's last MaxContainerTerminationMessageLogLines lines, of
// which a ring buffer keeps the last MaxContainerTerminationMessageLogLength
// bytes. The kubelet's own CRI log reader parses the file; stdout and
// stderr go to the same buffer, in the order they were written.
func lastLogLines(ctx context.Context, path string) string {
	lines := int64(kubecontainer.MaxContainerTerminationMessageLogLines)
	buf, _ := buffer.NewTypedRingFixed[byte](kubecontainer.MaxContainerTerminationMessageLogLength)
	opts := &logs.LogOptions{TailLines: &lines} // kuberuntime_logs.go:31-51's conversion of PodLogOptions{TailLines}
	// No follow: the runtime is never asked, so no runtime service.
	if err := logs.ReadLogs(ctx, path, "", opts, nil, buf, buf); err != nil {
		return fmt.Sprintf("Error on reading termination message from logs: %v", err)
	}
	return string(buf.Slice())
}
