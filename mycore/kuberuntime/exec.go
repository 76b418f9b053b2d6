package kuberuntime

import (
	"context"
	"time"

	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

var _ kubecontainer.CommandRunner = (*Manager)(nil)

// RunInContainer runs cmd in a running container and returns its stdout
// and stderr together: RunInContainer (kuberuntime_container.go:1366),
// the CommandRunner behind exec probes. It is CRI ExecSync; the runtime
// ends the command after timeout and the call then fails with
// cri-client's ErrCommandTimedOut. A non-zero exit is an error that
// carries the code (utilexec.CodeExitError) — the exec prober reads it.
func (m *Manager) RunInContainer(ctx context.Context, id kubecontainer.ContainerID, cmd []string, timeout time.Duration) ([]byte, error) {
	// The pod is whatever ctx says (a hook's, withAbout): the prober calls
	// through this interface with none, so its probes are the node's.
	stdout, stderr, err := m.cri.ExecSync(ctx, aboutIn(ctx), id.ID, cmd, timeout)
	return append(stdout, stderr...), err
}
