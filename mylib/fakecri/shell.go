package fakecri

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

// The mock shell runs container commands and exec'd commands.
//
// Built-in commands (also callable directly, e.g. ["echo","hi"] or
// ["/bin/cat","/etc/hostname"]):
//
//	echo [-n] [-e] ARGS    printf FORMAT ARGS (%s %d %%, \n \t escapes)
//	cat [FILE...]          no FILE: copy stdin; files: see files.go
//	env, printenv [NAME]   hostname, pwd, id, date, true, :, false
//	sleep N|Ns|Nm|infinity exit [N]
//	trap ACTION SIG...     ACTION '' ignores, '-' resets, else a handler script
//	NAME=VALUE, export NAME=VALUE
//	CMD >&2, CMD 2>&1, CMD >/dev/null, CMD 2>/dev/null
//	sh|bash -c SCRIPT      sh with no -c: a line-by-line REPL on stdin
//	while LIST; do LIST; done
//
// Signals are delivered at blocking points (sleep, reading stdin, waiting
// forever, each loop iteration) — so a script's first commands (its trap)
// always run before a signal is looked at, as on a real machine where the
// shell starts long before the kubelet's StopContainer arrives. Unlike a
// real PID 1, a signal without a trap terminates the shell at once (exit
// 128+n) — the behaviour of a well-behaved process, which is what the
// stop-escalation lessons need. A trap handler runs as soon as the signal
// arrives.
//
// Files: shell_parse.go (grammar), shell.go (interpreter), shell_builtins.go
// (commands), shell_io.go (signals, waiting, stdin, the REPL).

const sigKILL = 9

// signalMsg is what a container process receives.
type signalMsg struct {
	sig    int    // unix signal number (ignored when exit is set)
	exit   *int32 // forced exit from the control API
	reason string
}

// exitError unwinds the interpreter when the shell exits.
type exitError struct{ code int32 }

func (e *exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

type trapAction struct {
	ignore  bool
	handler list
}

// shell is one running interpreter: a container's main process or an exec.
type shell struct {
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
	sigs     <-chan signalMsg // nil for exec processes
	traps    map[int]trapAction
	status   int32
	blocked  bool // set by wait: lets loops know they did not spin
	// exitReason is the reason of a forced exit (control API), which must
	// survive the unwinding that turns exitError into a status.
	exitReason string
	now        func() time.Time
}

// errNotFound is returned for a command the mock does not know.
var errNotFound = errors.New("command not found")

// runArgv runs one argv the way execve would: built-ins and shells run,
// anything else returns errNotFound so the caller can decide (a daemon for
// a container's main process, an error for exec).
func (sh *shell) runArgv(argv []string) (int32, error) {
	if len(argv) == 0 {
		return 0, errNotFound
	}
	name := path.Base(argv[0])
	switch name {
	case "sh", "bash", "ash", "dash":
		return sh.runShellArgs(name, argv[1:])
	}
	if _, ok := builtins[name]; !ok {
		return 0, errNotFound
	}
	st, err := sh.call(append([]string{name}, argv[1:]...))
	return sh.finish(st, err)
}

// finish converts an exitError into a status.
func (sh *shell) finish(st int32, err error) (int32, error) {
	var ex *exitError
	if errors.As(err, &ex) {
		return ex.code, nil
	}
	return st, err
}

func (sh *shell) runShellArgs(name string, args []string) (int32, error) {
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

func (sh *shell) runList(l list) error {
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

func (sh *shell) runNode(n node) (int32, error) {
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

func (sh *shell) expand(w word) string {
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
func (sh *shell) assign(s string) bool {
	k, v, ok := strings.Cut(s, "=")
	if !ok || !validName(k) {
		return false
	}
	sh.env.set(k, v)
	return true
}

// call runs one simple command inside the shell.
func (sh *shell) call(argv []string) (int32, error) {
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
