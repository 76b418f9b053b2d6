package cri

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Kinds of dial failure; test them with errors.Is.
var (
	// ErrNotReachable: no socket, or nothing listens on it.
	ErrNotReachable = errors.New("runtime not reachable")
	// ErrPermission: the socket exists but belongs to another user.
	ErrPermission = errors.New("permission denied")
	// ErrWrongAPI: something answers, but not CRI v1 (e.g. only v1alpha2).
	ErrWrongAPI = errors.New("runtime does not serve CRI v1")
)

// DialError explains why Dial failed, in words a learner can act on.
type DialError struct {
	Endpoint string
	Kind     error // one of ErrNotReachable, ErrPermission, ErrWrongAPI, or nil
	Hint     string
	Err      error // what gRPC / the OS said
}

func (e *DialError) Error() string {
	msg := e.Hint
	if e.Err != nil {
		msg += "\n  (" + e.Err.Error() + ")"
	}
	return msg
}

func (e *DialError) Unwrap() []error { return []error{e.Kind, e.Err} }

// runtimeName is how messages call the thing behind endpoint: "containerd"
// for a socket of containerd's name (its default is
// /run/containerd/containerd.sock), else a neutral name (it may be a mock).
func runtimeName(endpoint string) string {
	if filepath.Base(SocketPath(endpoint)) == "containerd.sock" {
		return "containerd"
	}
	return "the CRI runtime"
}

// explain turns a low-level dial or first-call error into a DialError. The
// kubelet itself just logs these and retries; a learner needs the cause,
// and, where the caller named one (WithStartHint), the command that fixes
// it.
func explain(endpoint string, err error, startHint string) error {
	if err == nil {
		return nil
	}
	name, sock := runtimeName(endpoint), SocketPath(endpoint)
	text := err.Error()
	st, _ := status.FromError(err)
	e := &DialError{Endpoint: endpoint, Err: err}
	startWith := ""
	if startHint != "" {
		startWith = "; start it with: " + startHint
	}
	switch {
	case strings.Contains(text, "no such file or directory"):
		e.Kind = ErrNotReachable
		e.Hint = fmt.Sprintf("%s is not reachable at %s: the socket does not exist%s", name, sock, startWith)
	case strings.Contains(text, "connection refused"):
		e.Kind = ErrNotReachable
		e.Hint = fmt.Sprintf("%s is not reachable at %s: nothing listens on the socket (left over from a killed run?)%s", name, sock, startWith)
	case strings.Contains(text, "permission denied"):
		e.Kind = ErrPermission
		if startHint == "" {
			e.Hint = fmt.Sprintf("permission denied on %s: the socket belongs to the user who started the runtime (root?), and its file mode is CRI's only access control: start the runtime so that the socket is yours, or run as its owner", sock)
		} else {
			e.Hint = fmt.Sprintf("permission denied on %s: the socket belongs to the user who started it; run `%s` from your own account (sudo, not a root shell): it hands the socket to you, and what you run then reaches it as you", sock, startHint)
		}
	case st.Code() == codes.Unimplemented && strings.Contains(text, "runtime.v1."):
		// A v1alpha2-only runtime (containerd < 1.6, or CRI v1 disabled)
		// has no runtime.v1.RuntimeService: gRPC answers "unknown service".
		e.Kind = ErrWrongAPI
		e.Hint = fmt.Sprintf("%s at %s does not serve CRI v1 (runtime.v1.RuntimeService); it probably speaks only v1alpha2, "+
			"which Kubernetes 1.26 and containerd 2.0 removed. Use containerd >= 1.6", name, endpoint)
		if startHint != "" {
			e.Hint += " (" + startHint + " installs one)"
		}
	case st.Code() == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded):
		e.Kind = ErrNotReachable
		e.Hint = fmt.Sprintf("%s at %s did not answer in time; is it overloaded or is something else listening there?", name, endpoint)
	default:
		e.Hint = fmt.Sprintf("cannot talk CRI to %s at %s", name, endpoint)
	}
	return e
}
