package fakecri

import (
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/mylib/fakecri/mocksh"
)

// The control API changes state from outside the CRI, standing in for the
// things that happen to real containers without the kubelet asking: a
// process crashes, the OOM killer strikes, the pause container dies, the
// CNI plugin breaks. The PLEG labs use it to make a change for the relist
// (or the evented PLEG) to discover.
//
// In process: the methods below. Out of process: the HTTP API on the
// control socket (control_server.go) and ControlClient.

// controlWait bounds how long a control call waits for a process to act
// on its signal; processes act at once, so hitting it means a bug.
const controlWait = 10 * time.Second

// SetContainerExited makes a running container's process exit now with
// exitCode. reason becomes ContainerStatus.reason ("OOMKilled" is what the
// kubelet looks for); empty means "Completed" for 0 and "Error" otherwise.
// It returns once the container is EXITED.
func (r *Runtime) SetContainerExited(id string, exitCode int32, reason string) error {
	p, full, err := r.runningProc(id)
	if err != nil {
		return err
	}
	code := exitCode
	if !p.signal(mocksh.Signal{Exit: &code, Reason: reason}) {
		return status.Errorf(codes.FailedPrecondition, "container %q already exited", full)
	}
	return waitDone(p, full)
}

// SignalContainer delivers a signal to a running container's process, as
// `kill -SIG` on the host would: it may ignore it (trap), handle it, or
// die with 128+n. It does not wait.
func (r *Runtime) SignalContainer(id string, signal string) error {
	n, ok := mocksh.ParseSignal(signal)
	if !ok {
		return status.Errorf(codes.InvalidArgument, "unknown signal %q", signal)
	}
	p, full, err := r.runningProc(id)
	if err != nil {
		return err
	}
	if !p.signal(mocksh.Signal{Num: n}) {
		return status.Errorf(codes.FailedPrecondition, "container %q already exited", full)
	}
	return nil
}

func (r *Runtime) runningProc(id string) (*proc, string, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	full, err := resolveID(r.containers, "container", id)
	if err != nil {
		return nil, "", err
	}
	c := r.containers[full]
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, "", status.Errorf(codes.FailedPrecondition, "container %q is in %s state, not running", full, c.state)
	}
	return c.proc, full, nil
}

func waitDone(p *proc, id string) error {
	t := time.NewTimer(controlWait)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
		return status.Errorf(codes.DeadlineExceeded, "container %q did not exit within %s", id, controlWait)
	}
}

// SetSandboxNotReady flips a sandbox to NOTREADY, as if its pause process
// or network namespace died. Its containers keep running — the kubelet is
// the one that notices and kills and recreates the pod. Idempotent.
func (r *Runtime) SetSandboxNotReady(id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	full, err := resolveID(r.sandboxes, "pod sandbox", id)
	if err != nil {
		return err
	}
	r.markNotReady(r.sandboxes[full])
	return nil
}

// SetRuntimeCondition sets a Status condition, e.g. NetworkReady=false to
// see the kubelet turn the node NotReady ("container runtime network not
// ready"). Unknown types are added as optional conditions.
func (r *Runtime) SetRuntimeCondition(condType string, ok bool, reason, message string) error {
	if condType == "" {
		return status.Error(codes.InvalidArgument, "condition type must not be empty")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conditions[condType] = &runtimeapi.RuntimeCondition{Type: condType, Status: ok, Reason: reason, Message: message}
	return nil
}

// Snapshot is a compact view of the runtime's state for the control API.
type Snapshot struct {
	Sandboxes  []SandboxInfo   `json:"sandboxes"`
	Containers []ContainerInfo `json:"containers"`
}

// SandboxInfo summarises one sandbox.
type SandboxInfo struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	State     string `json:"state"`
	IP        string `json:"ip,omitempty"`
}

// ContainerInfo summarises one container.
type ContainerInfo struct {
	ID        string `json:"id"`
	SandboxID string `json:"sandboxId"`
	Name      string `json:"name"`
	Attempt   uint32 `json:"attempt"`
	State     string `json:"state"`
	ExitCode  int32  `json:"exitCode"`
	Reason    string `json:"reason,omitempty"`
}

// Snapshot returns every sandbox and container, oldest first.
func (r *Runtime) Snapshot() Snapshot {
	var s Snapshot
	for _, sb := range r.listSandboxes(nil) {
		s.Sandboxes = append(s.Sandboxes, SandboxInfo{
			ID: sb.Id, Name: sb.Metadata.Name, Namespace: sb.Metadata.Namespace, State: sb.State.String(),
		})
	}
	r.mu.RLock()
	for i := range s.Sandboxes {
		if sb, ok := r.sandboxes[s.Sandboxes[i].ID]; ok {
			s.Sandboxes[i].IP = sb.ip
		}
	}
	cs := r.filterContainers("", "", nil)
	for _, c := range cs {
		s.Containers = append(s.Containers, ContainerInfo{
			ID: c.id, SandboxID: c.sandboxID, Name: c.config.GetMetadata().GetName(),
			Attempt: c.config.GetMetadata().GetAttempt(), State: c.state.String(),
			ExitCode: c.exitCode, Reason: c.reason,
		})
	}
	r.mu.RUnlock()
	return s
}
