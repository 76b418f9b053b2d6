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
)

// proc is a container's main "process": one goroutine running the mock
// shell. Signals reach it through sigs; done is closed after the runtime
// has recorded the exit, so "wait for done" means "status says EXITED".
type proc struct {
	sigs chan signalMsg
	done chan struct{}
}

// signal delivers m; false if the process has already exited.
func (p *proc) signal(m signalMsg) bool {
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
	p := &proc{sigs: make(chan signalMsg, 16), done: make(chan struct{})}
	c.proc, c.io = p, cio
	c.life, c.lifeCancel = context.WithCancel(r.ctx)
	c.state, c.startedAt = runtimeapi.ContainerState_CONTAINER_RUNNING, now
	r.nextPid++
	c.pid = r.nextPid

	sc := c.config.GetLinux().GetSecurityContext()
	sh := &shell{
		ctx:      c.life,
		stdout:   cio.writer(runtimeapi.Stdout),
		stderr:   cio.writer(runtimeapi.Stderr),
		env:      &envList{kv: c.env(sb)},
		files:    newContainerFS(c, sb).read,
		hostname: sb.hostname(),
		workDir:  c.workDir(),
		uid:      sc.GetRunAsUser().GetValue(),
		gid:      sc.GetRunAsGroup().GetValue(),
		sigs:     p.sigs,
		traps:    map[int]trapAction{},
		now:      r.opts.now,
	}
	if c.ignoreTerm {
		sh.traps[int(unix.SIGTERM)] = trapAction{ignore: true}
	}
	argv := c.argv()
	// An interactive shell (stdin open) waits for input that only attach
	// could send; the mock attaches output only, so it simply runs on.
	interactive := c.config.GetStdin() && isShellWithoutScript(argv)

	r.procs.Add(1)
	go func() {
		defer r.procs.Done()
		code, reason := runMain(sh, argv, interactive)
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

// runMain runs a container command to completion. A command the mock shell
// does not know (nginx, /pause, a Go server …) is a daemon: it runs until
// a signal ends it.
func runMain(sh *shell, argv []string, interactive bool) (int32, string) {
	var err error
	var code int32
	if len(argv) == 0 || interactive {
		err = sh.wait(-1)
	} else {
		code, err = sh.runArgv(argv)
		if errors.Is(err, errNotFound) {
			err = sh.wait(-1)
		}
	}
	var ex *exitError
	if errors.As(err, &ex) {
		code = ex.code
	}
	return code, sh.exitReason
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
	if timeout > 0 && p.signal(signalMsg{sig: stopSignal}) {
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
	p.signal(signalMsg{sig: sigKILL})
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}
