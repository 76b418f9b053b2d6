package fakecri

import (
	"bytes"
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/mylib/fakecri/mocksh"
)

// ErrNotHandled is returned by an ExecHook to let the built-in mock shell
// run the command instead.
var ErrNotHandled = errors.New("fakecri: exec not handled by hook")

// ExecSync runs a command in a running container and returns its output.
// A timeout (seconds) is honoured: the command is killed and the call
// fails with DeadlineExceeded, which the kubelet's exec prober reports as
// a probe timeout. Output is capped at 16 MiB per stream, as the CRI asks.
func (r *Runtime) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	if len(req.GetCmd()) == 0 {
		return nil, status.Errorf(codes.InvalidArgument, "ExecSync: cmd must not be empty (container %q)", req.GetContainerId())
	}
	runCtx := ctx
	if t := req.GetTimeout(); t > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, time.Duration(t)*time.Second)
		defer cancel()
	}
	stdout, stderr := &cappedBuffer{max: maxFileRead}, &cappedBuffer{max: maxFileRead}
	code, err := r.execIn(runCtx, req.GetContainerId(), req.GetCmd(), nil, stdout, stderr, false)
	if ctx.Err() == nil && errors.Is(runCtx.Err(), context.DeadlineExceeded) {
		return nil, status.Errorf(codes.DeadlineExceeded, "ExecSync: command %q in container %q timed out after %ds", req.GetCmd(), req.GetContainerId(), req.GetTimeout())
	}
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ExecSyncResponse{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: code}, nil
}

// execIn runs cmd inside container id: through the ExecHook if one is set,
// else the mock shell. The command dies (exit 137) if the container exits
// or ctx ends. An unknown command is an error, as runc's "executable file
// not found" is.
func (r *Runtime) execIn(ctx context.Context, id string, cmd []string, stdin io.Reader, stdout, stderr io.Writer, tty bool) (int32, error) {
	if len(cmd) == 0 {
		return 0, status.Errorf(codes.InvalidArgument, "exec: cmd must not be empty (container %q)", id)
	}
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = stdout // with a TTY both go to one stream
	}
	r.mu.RLock()
	if err := r.checkOpen(); err != nil {
		r.mu.RUnlock()
		return 0, err
	}
	full, err := resolveID(r.containers, "container", id)
	if err != nil {
		r.mu.RUnlock()
		return 0, err
	}
	c := r.containers[full]
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.mu.RUnlock()
		return 0, status.Errorf(codes.FailedPrecondition, "exec: container %q is in %s state, not running", full, c.state)
	}
	sb := r.sandboxes[c.sandboxID]
	sc := c.config.GetLinux().GetSecurityContext()
	cfg := mocksh.Config{
		Env:      c.env(sb),
		ReadFile: newContainerFS(c, sb).read,
		Hostname: sb.hostname(),
		WorkDir:  c.workDir(),
		UID:      sc.GetRunAsUser().GetValue(),
		GID:      sc.GetRunAsGroup().GetValue(),
		TTY:      tty,
		Now:      r.opts.now,
	}
	life := c.life
	r.sessions.Add(1)
	r.execs.Add(1)
	r.mu.RUnlock()
	defer r.sessions.Done()
	defer r.execs.Add(-1)

	// The exec lives in the container's "cgroup": it ends with the container.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopAfter := context.AfterFunc(life, cancel)
	defer stopAfter()

	if h := r.opts.execHook; h != nil {
		code, err := h(ctx, ExecRequest{ContainerID: full, Cmd: cmd, TTY: tty, Stdin: orEmpty(stdin), Stdout: stdout, Stderr: stderr})
		if !errors.Is(err, ErrNotHandled) {
			return code, err
		}
	}

	// The shell is made after the hook had its chance: it starts reading
	// stdin at once.
	if tty {
		stdout = &crlfWriter{w: stdout}
		stderr = stdout
	}
	cfg.Stdin, cfg.Stdout, cfg.Stderr = stdin, stdout, stderr
	sh := mocksh.New(ctx, cfg)
	defer sh.Close()
	code, err := sh.Run(cmd)
	if errors.Is(err, mocksh.ErrNotFound) {
		return 0, status.Errorf(codes.Unknown, "exec in container %q: OCI runtime exec failed: exec: %q: executable file not found in $PATH (fakecri knows: %s)", full, cmd[0], mocksh.Commands())
	}
	return code, err
}

func orEmpty(r io.Reader) io.Reader {
	if r == nil {
		return bytes.NewReader(nil)
	}
	return r
}

// cappedBuffer keeps the first max bytes and silently drops the rest
// (CVE-2022-1708: a runtime must not buffer unbounded exec output).
type cappedBuffer struct {
	bytes.Buffer
	max int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// crlfWriter does what a pty's ONLCR does: "\n" becomes "\r\n", so output
// lines up in the client's raw-mode terminal.
type crlfWriter struct{ w io.Writer }

func (c *crlfWriter) Write(p []byte) (int, error) {
	if _, err := c.w.Write(bytes.ReplaceAll(p, []byte("\n"), []byte("\r\n"))); err != nil {
		return 0, err
	}
	return len(p), nil
}
