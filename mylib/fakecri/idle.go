package fakecri

import (
	"context"
	"sync"

	"kubelet-labs/mylib/fakecri/mocksh"
)

// idleProc is a container's main process that the mock shell does not
// interpret — /pause, nginx, a Go server: it does nothing until a signal,
// or the end of its container's life, ends it (mocksh's Daemon). It is
// kept as state rather than as a goroutine parked in Daemon's select:
// fleet mode's ten thousand pods are ten thousand such processes, and a
// parked goroutine costs a stack of at least 8 KiB where this costs a few
// hundred bytes. Signals are handled as Daemon handles them
// (Shell.DaemonSignal); the exit is recorded once, by whichever comes
// first: a signal that ends it, or the context (exit 137).
type idleProc struct {
	mu     sync.Mutex
	sh     *mocksh.Shell
	exited bool
	exit   func(code int32, reason string)
	// stopWatch stops the context callback (context.AfterFunc).
	stopWatch func() bool
}

// startIdle makes c's process an idle one. Caller holds r.mu and has
// added it to r.procs, which the exit releases.
func (r *Runtime) startIdle(c *container, sh *mocksh.Shell) {
	ip := &idleProc{sh: sh}
	ip.exit = func(code int32, reason string) {
		defer r.procs.Done()
		r.processExited(c, code, reason)
	}
	c.proc.idle = ip
	ip.stopWatch = context.AfterFunc(c.life, ip.killedByContext)
}

// deliver handles one signal; false if the process had already exited.
// An exit is recorded before it returns (the caller must not hold r.mu).
func (ip *idleProc) deliver(m mocksh.Signal) bool {
	ip.mu.Lock()
	if ip.exited {
		ip.mu.Unlock()
		return false
	}
	code, exits := ip.sh.DaemonSignal(m)
	ip.exited = exits
	reason := ip.sh.ExitReason()
	ip.mu.Unlock()
	if exits {
		ip.stopWatch()
		ip.exit(code, reason)
	}
	return true
}

// killedByContext records the exit at the end of the container's life
// (the runtime closed), as Daemon exits then, unless a signal came first.
func (ip *idleProc) killedByContext() {
	ip.mu.Lock()
	done := ip.exited
	ip.exited = true
	ip.mu.Unlock()
	if !done {
		ip.exit(int32(128+sigKILL), "")
	}
}
