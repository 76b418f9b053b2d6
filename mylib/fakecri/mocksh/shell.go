package mocksh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"
)

// SIGKILL cannot be trapped.
const sigKILL = 9

// Signal is what a running shell receives on Config.Signals.
type Signal struct {
	// Num is the unix signal number (ignored when Exit is set).
	Num int
	// Exit forces an exit with this status, whatever the traps (fakecri's
	// control API: "this container exits now, with this code").
	Exit *int32
	// Reason goes with Exit; Shell.ExitReason returns it.
	Reason string
}

// Config is the world a shell runs in: its container's streams,
// environment, files and identity.
type Config struct {
	// Stdin is read by cat and the REPL; nil is empty. New starts a
	// goroutine reading it, which Close releases.
	Stdin          io.Reader
	Stdout, Stderr io.Writer // nil: discarded
	// Env is the environment, NAME=VALUE, in the order env prints it.
	Env []string
	// ReadFile is what cat FILE reads; nil: no file exists.
	ReadFile func(name string) ([]byte, error)
	Hostname string
	WorkDir  string
	UID, GID int64
	// TTY makes the REPL a small line editor with a prompt and echo.
	TTY bool
	// Signals delivers signals; nil: none (an exec'd command).
	Signals <-chan Signal
	// Ignore lists signals ignored from the start, as if by trap '' SIG
	// (fakecri's ignore-sigterm annotation).
	Ignore []int
	// Now is date's clock; nil: time.Now.
	Now func() time.Time
}

// exitError unwinds the interpreter when the shell exits.
type exitError struct{ code int32 }

func (e *exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

type trapAction struct {
	ignore  bool
	handler list
}

// Shell is one running interpreter: a container's main process or an
// exec. It is used by one goroutine at a time.
type Shell struct {
	ctx      context.Context
	stdin    *chanReader // nil: stdin is empty
	stdout   io.Writer
	stderr   io.Writer
	env      *envList
	files    func(name string) ([]byte, error)
	hostname string
	workDir  string
	uid, gid int64
	tty      bool
	sigs     <-chan Signal // nil for exec processes
	traps    map[int]trapAction
	status   int32
	blocked  bool // set by wait: lets loops know they did not spin
	// exitReason is the reason of a forced exit (control API), which must
	// survive the unwinding that turns exitError into a status.
	exitReason string
	now        func() time.Time
}

// New returns a shell that lives until ctx ends: cancelling ctx kills
// whatever it runs (exit 137).
func New(ctx context.Context, c Config) *Shell {
	sh := &Shell{
		ctx: ctx, stdout: c.Stdout, stderr: c.Stderr,
		env:   &envList{kv: append([]string(nil), c.Env...)},
		files: c.ReadFile, hostname: c.Hostname, workDir: c.WorkDir,
		uid: c.UID, gid: c.GID, tty: c.TTY, sigs: c.Signals,
		traps: map[int]trapAction{}, now: c.Now,
	}
	if sh.stdout == nil {
		sh.stdout = io.Discard
	}
	if sh.stderr == nil {
		sh.stderr = io.Discard
	}
	if sh.files == nil {
		sh.files = func(string) ([]byte, error) { return nil, errNoSuchFile }
	}
	if sh.now == nil {
		sh.now = time.Now
	}
	for _, n := range c.Ignore {
		sh.traps[n] = trapAction{ignore: true}
	}
	if c.Stdin != nil {
		sh.stdin = newChanReader(c.Stdin)
	}
	return sh
}

// Close releases the goroutine reading Config.Stdin, if it waits to hand
// over data. (One blocked inside Read ends when the stream is closed.)
func (sh *Shell) Close() {
	if sh.stdin != nil {
		sh.stdin.stop()
	}
}

// ExitReason is the Reason of the forced exit (Signal.Exit) that ended the
// shell, or "".
func (sh *Shell) ExitReason() string { return sh.exitReason }

// Daemon behaves as a process the shell does not know (nginx, /pause):
// it runs until a signal without an ignoring trap, or the end of the
// context, ends it, and returns its exit status.
func (sh *Shell) Daemon() int32 {
	code, _ := sh.finish(0, sh.wait(-1))
	return code
}

// DaemonSignal is one step of Daemon for a caller that keeps the daemon
// as state instead of a goroutine blocked in Daemon: it handles m as
// Daemon would and says whether the daemon exits, and with what status
// (ExitReason gives the reason of a forced exit). The end of the context
// is the caller's to watch: Daemon would exit 137. Only for a shell that
// ran no script: its traps can only ignore (Config.Ignore), so handling a
// signal never runs a command and never blocks.
func (sh *Shell) DaemonSignal(m Signal) (code int32, exits bool) {
	err := sh.handleSignal(m)
	if err == nil {
		return 0, false
	}
	code, _ = sh.finish(0, err)
	return code, true
}

var errNoSuchFile = errors.New("No such file or directory")

// ErrNotFound is what Run returns for an argv that is neither a built-in
// nor a shell: the caller decides (a daemon for a container's main process,
// an error for exec).
var ErrNotFound = errors.New("command not found")

// Runs reports whether Run interprets argv (a shell or a built-in);
// anything else is a daemon to it, for which Run returns ErrNotFound.
func Runs(argv []string) bool {
	if len(argv) == 0 {
		return false
	}
	name := path.Base(argv[0])
	if isShell(name) {
		return true
	}
	_, ok := builtins[name]
	return ok
}

func isShell(name string) bool {
	switch name {
	case "sh", "bash", "ash", "dash":
		return true
	}
	return false
}

// Run runs one argv the way execve would and returns its exit status:
// built-ins and shells run, anything else returns ErrNotFound.
func (sh *Shell) Run(argv []string) (int32, error) {
	if !Runs(argv) {
		return 0, ErrNotFound
	}
	name := path.Base(argv[0])
	if isShell(name) {
		return sh.runShellArgs(name, argv[1:])
	}
	st, err := sh.call(append([]string{name}, argv[1:]...))
	return sh.finish(st, err)
}

// finish converts an exitError into a status.
func (sh *Shell) finish(st int32, err error) (int32, error) {
	var ex *exitError
	if errors.As(err, &ex) {
		return ex.code, nil
	}
	return st, err
}

func (sh *Shell) runShellArgs(name string, args []string) (int32, error) {
	if len(args) >= 2 && args[0] == "-c" {
		l, err := parseScript(args[1])
		if err != nil {
			fmt.Fprintf(sh.stderr, "%s: %v\n", name, err)
			return 2, nil
		}
		return sh.finish(sh.status, sh.runList(l))
	}
	if len(args) == 0 || (len(args) == 1 && (args[0] == "-i" || args[0] == "-")) {
		return sh.finish(0, sh.repl())
	}
	fmt.Fprintf(sh.stderr, "%s: can't open '%s': scripts from files are not supported by the mock shell\n", name, args[0])
	return 2, nil
}

func (sh *Shell) runList(l list) error {
	for _, a := range l {
		st, err := sh.runNode(a.first)
		if err != nil {
			return err
		}
		for _, t := range a.rest {
			if (t.op == "&&" && st != 0) || (t.op == "||" && st == 0) {
				continue
			}
			if st, err = sh.runNode(t.n); err != nil {
				return err
			}
		}
		sh.status = st
	}
	return nil
}

func (sh *Shell) runNode(n node) (int32, error) {
	switch n := n.(type) {
	case whileLoop:
		var st int32
		for {
			sh.blocked = false
			if err := sh.runList(n.cond); err != nil {
				return 0, err
			}
			if sh.status != 0 {
				return st, nil
			}
			if err := sh.runList(n.body); err != nil {
				return 0, err
			}
			st = sh.status
			// A loop that never blocks would spin a CPU and flood the log;
			// a mock may slow it down to 10 iterations per second.
			if !sh.blocked {
				if err := sh.wait(100 * time.Millisecond); err != nil {
					return 0, err
				}
			}
		}
	case simpleCmd:
		argv := make([]string, 0, len(n.words))
		for _, w := range n.words {
			argv = append(argv, sh.expand(w))
		}
		if len(argv) == 1 && len(n.redirs) == 0 && sh.assign(argv[0]) {
			return 0, nil
		}
		if len(n.redirs) > 0 {
			saved := [2]io.Writer{sh.stdout, sh.stderr}
			defer func() { sh.stdout, sh.stderr = saved[0], saved[1] }()
			sh.stdout, sh.stderr = applyRedirects(n.redirs, sh.stdout, sh.stderr)
		}
		st, err := sh.call(argv)
		sh.status = st
		return st, err
	}
	return 0, fmt.Errorf("unknown node %T", n)
}

// applyRedirects returns the streams after redirections, left to right.
func applyRedirects(rs []redirect, stdout, stderr io.Writer) (io.Writer, io.Writer) {
	fds := [3]io.Writer{nil, stdout, stderr}
	for _, r := range rs {
		if r.dup == 0 {
			fds[r.fd] = io.Discard
		} else {
			fds[r.fd] = fds[r.dup]
		}
	}
	return fds[1], fds[2]
}

func (sh *Shell) expand(w word) string {
	var b strings.Builder
	for _, p := range w {
		switch {
		case !p.isVar:
			b.WriteString(p.text)
		case p.text == "?":
			b.WriteString(strconv.Itoa(int(sh.status)))
		case p.text == "$":
			b.WriteString("1")
		default:
			v, _ := sh.env.get(p.text)
			b.WriteString(v)
		}
	}
	return b.String()
}

// assign handles a NAME=VALUE statement.
func (sh *Shell) assign(s string) bool {
	k, v, ok := strings.Cut(s, "=")
	if !ok || !validName(k) {
		return false
	}
	sh.env.set(k, v)
	return true
}

// call runs one simple command inside the shell.
func (sh *Shell) call(argv []string) (int32, error) {
	name := path.Base(argv[0])
	switch name {
	case "sh", "bash", "ash", "dash":
		// A nested shell shares our streams and signals.
		return sh.runShellArgs(name, argv[1:])
	}
	fn, ok := builtins[name]
	if !ok {
		fmt.Fprintf(sh.stderr, "sh: %s: not found\n", argv[0])
		return 127, nil
	}
	return fn(sh, argv[1:])
}
