package cri

import (
	"context"
	"errors"
	"time"

	utilexec "k8s.io/utils/exec"
)

// ExecResult is what a command run with ExecSync produced.
type ExecResult struct {
	Stdout, Stderr []byte
	ExitCode       int
}

// Exec runs cmd in a running container and waits for it: CRI ExecSync, the
// call behind exec probes and the kubelet's RunInContainer
// (kuberuntime_container.go, v1.36.3). `kubectl exec` uses the streaming Exec
// call instead (lab 14). A non-zero exit status is a result, not an error:
// the kubelet client reports it as utilexec.CodeExitError, unpacked here.
func (c *Client) Exec(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (ExecResult, error) {
	stdout, stderr, err := c.Runtime.ExecSync(c.ctx(ctx), containerID, cmd, timeout)
	res := ExecResult{Stdout: stdout, Stderr: stderr}
	var exit utilexec.CodeExitError
	if errors.As(err, &exit) {
		res.ExitCode = exit.ExitStatus()
		return res, nil
	}
	return res, err
}
