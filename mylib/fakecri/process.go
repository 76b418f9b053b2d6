package fakecri

import (
	"context"
	"errors"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/mylib/fakecri/mocksh"
)

// sigKILL is what ends a container for good.
const sigKILL = int(unix.SIGKILL)

// proc is a container's main "process": a goroutine running the mock
// shell (package mocksh), its signals sent through sigs — or, for a
// process that only waits for a signal (/pause, nginx), no goroutine at
// all (idle, idle.go). done is closed after the runtime has recorded the
// exit, so "wait for done" means "status says EXITED".
type proc struct {
	sigs chan mocksh.Signal
	idle *idleProc
	done chan struct{}
}

// signal delivers m; false if the process has already exited.
func (p *proc) signal(m mocksh.Signal) bool {
	if p.idle != nil {
		return p.idle.deliver(m)
	}
	select {
	case p.sigs <- m:
		return true
	case <-p.done:
		return false
	}
}

// signalNumber maps a CRI stop signal to its unix number (SIGTERM default).
func signalNumber(s runtimeapi.Signal) int {
	if s == runtimeapi.Signal_RUNTIME_DEFAULT {
		return int(unix.SIGTERM)
	}
	name := strings.ReplaceAll(s.String(), "PLUS", "+") // SIGRTMINPLUS1 → SIGRTMIN+1
	if n := unix.SignalNum(name); n != 0 {
		return int(n)
	}
	return int(unix.SIGTERM)
}

// startProcess starts c's main process. Caller holds r.mu for writing and
// has already checked that c is CREATED and its sandbox READY. It mirrors
// containerd's StartContainer (internal/cri/server/container_start.go):
// open the log first, and if that fails the container is left EXITED with
// exit code 128 and reason StartError.
func (r *Runtime) startProcess(c *container, sb *sandbox) error {
	now := r.nowNano()
	cio := &containerIO{tty: c.config.GetTty()}
	if c.logPath != "" {
		l, err := openLogFile(c.logPath, r.opts.now)
		if err != nil {
			c.state, c.startedAt, c.finishedAt = runtimeapi.ContainerState_CONTAINER_EXITED, now, now
			c.exitCode, c.reason, c.message = 128, "StartError", "failed to open log file: "+err.Error()
			r.emitContainerEvent(c, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
			return status.Errorf(codes.Internal, "start container %q: %s", c.id, c.message)
		}
		cio.log = l
	}
	p := &proc{done: make(chan struct{})}
	c.proc, c.io = p, cio
	c.life, c.lifeCancel = context.WithCancel(r.ctx)
	c.state, c.startedAt = runtimeapi.ContainerState_CONTAINER_RUNNING, now
	r.nextPid++
	c.pid = r.nextPid

	sc := c.config.GetLinux().GetSecurityContext()
	cfg := mocksh.Config{
		Stdout:   cio.writer(runtimeapi.Stdout),
		Stderr:   cio.writer(runtimeapi.Stderr),
		Env:      c.env(sb),
		ReadFile: newContainerFS(c, sb).read,
		Hostname: sb.hostname(),
		WorkDir:  c.workDir(),
		UID:      sc.GetRunAsUser().GetValue(),
		GID:      sc.GetRunAsGroup().GetValue(),
		Now:      r.opts.now,
	}
	if c.ignoreTerm {
		cfg.Ignore = []int{int(unix.SIGTERM)}
	}
	argv := c.argv()
	// An interactive shell (stdin open) waits for input that only attach
	// could send; the mock attaches output only, so it simply runs on.
	interactive := c.config.GetStdin() && isShellWithoutScript(argv)

	r.procs.Add(1)
	if interactive || !mocksh.Runs(argv) {
		// A daemon: nothing to interpret, only signals to wait for.
		r.startIdle(c, mocksh.New(c.life, cfg))
		return nil
	}
	p.sigs = make(chan mocksh.Signal, 16)
	cfg.Signals = p.sigs
	sh := mocksh.New(c.life, cfg)
	go func() {
		defer r.procs.Done()
		code, reason := runMain(sh, argv)
		r.processExited(c, code, reason)
	}()
	return nil
}

func isShellWithoutScript(argv []string) bool {
	if len(argv) == 0 {
		return false
	}
	switch path.Base(argv[0]) {
	case "sh", "bash", "ash", "dash":
		return len(argv) == 1 || argv[1] != "-c"
	}
	return false
}

// runMain runs a container command the mock shell interprets to
// completion. (A command it does not know — nginx, /pause, a Go server —
// is an idle process, idle.go.)
func runMain(sh *mocksh.Shell, argv []string) (int32, string) {
	code, err := sh.Run(argv)
	if errors.Is(err, mocksh.ErrNotFound) {
		code = sh.Daemon()
	}
	return code, sh.ExitReason()
}

// processExited records the exit. The log is flushed and attach sessions
// end before the state flips, so whoever sees EXITED also sees all output.
func (r *Runtime) processExited(c *container, code int32, reason string) {
	c.io.close()
	r.mu.Lock()
	c.state = runtimeapi.ContainerState_CONTAINER_EXITED
	c.finishedAt = r.nowNano()
	c.exitCode = code
	switch {
	case reason != "":
		c.reason = reason
	case code == 0:
		c.reason = "Completed"
	default:
		c.reason = "Error"
	}
	c.lifeCancel()
	r.emitContainerEvent(c, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
	r.mu.Unlock()
	close(c.proc.done)
}

// stopProcess is the grace-period dance of containerd's StopContainer
// (internal/cri/server/container_stop.go): send the stop signal, wait up to
// timeout, then SIGKILL. A zero timeout kills at once. It returns when the
// exit is recorded, or with the context's error.
func stopProcess(ctx context.Context, p *proc, timeout time.Duration, stopSignal int) error {
	if timeout > 0 && p.signal(mocksh.Signal{Num: stopSignal}) {
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-p.done:
			return nil
		case <-t.C:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	p.signal(mocksh.Signal{Num: sigKILL})
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}
