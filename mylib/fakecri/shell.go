package fakecri

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
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
//	sh|bash -c SCRIPT      sh with no -c: a line-by-line REPL on stdin
//	while LIST; do LIST; done
//
// Signals are delivered at blocking points (sleep, reading stdin, waiting
// forever, each loop iteration) — so a script's first commands (its trap)
// always run before a signal is looked at, as on a real machine where the
// shell starts long before the kubelet's StopContainer arrives. Unlike a real PID 1, a signal without a
// trap terminates the shell at once (exit 128+n) — the behaviour of a
// well-behaved process, which is what the stop-escalation lessons need.
// A trap handler runs as soon as the signal arrives.

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
		if len(argv) == 1 && sh.assign(argv[0]) {
			return 0, nil
		}
		st, err := sh.call(argv)
		sh.status = st
		return st, err
	}
	return 0, fmt.Errorf("unknown node %T", n)
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

type builtin func(sh *shell, args []string) (int32, error)

var builtins map[string]builtin

func init() {
	// Assigned in init because some built-ins (sh) refer back to the table.
	builtins = map[string]builtin{
		"echo":     biEcho,
		"printf":   biPrintf,
		"cat":      biCat,
		"env":      biEnv,
		"printenv": biPrintenv,
		"hostname": func(sh *shell, _ []string) (int32, error) { fmt.Fprintln(sh.stdout, sh.hostname); return 0, nil },
		"pwd":      func(sh *shell, _ []string) (int32, error) { fmt.Fprintln(sh.stdout, sh.workDir); return 0, nil },
		"id": func(sh *shell, _ []string) (int32, error) {
			fmt.Fprintf(sh.stdout, "uid=%d gid=%d\n", sh.uid, sh.gid)
			return 0, nil
		},
		"date": func(sh *shell, _ []string) (int32, error) {
			fmt.Fprintln(sh.stdout, sh.now().UTC().Format(time.UnixDate))
			return 0, nil
		},
		"true":   func(*shell, []string) (int32, error) { return 0, nil },
		":":      func(*shell, []string) (int32, error) { return 0, nil },
		"false":  func(*shell, []string) (int32, error) { return 1, nil },
		"exit":   biExit,
		"sleep":  biSleep,
		"trap":   biTrap,
		"export": biExport,
	}
}

func biEcho(sh *shell, args []string) (int32, error) {
	newline, escapes := true, false
	for len(args) > 0 && (args[0] == "-n" || args[0] == "-e" || args[0] == "-ne" || args[0] == "-en") {
		newline = newline && !strings.Contains(args[0], "n")
		escapes = escapes || strings.Contains(args[0], "e")
		args = args[1:]
	}
	s := strings.Join(args, " ")
	if escapes {
		s = unescape(s)
	}
	if newline {
		s += "\n"
	}
	io.WriteString(sh.stdout, s)
	return 0, nil
}

func biPrintf(sh *shell, args []string) (int32, error) {
	if len(args) == 0 {
		fmt.Fprintln(sh.stderr, "printf: usage: printf FORMAT [ARGUMENT]...")
		return 1, nil
	}
	format, rest := unescape(args[0]), args[1:]
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		if format[i] != '%' || i+1 == len(format) {
			b.WriteByte(format[i])
			continue
		}
		i++
		var arg string
		if format[i] != '%' && len(rest) > 0 {
			arg, rest = rest[0], rest[1:]
		}
		switch format[i] {
		case '%':
			b.WriteByte('%')
		case 'd':
			n, _ := strconv.Atoi(arg)
			b.WriteString(strconv.Itoa(n))
		default: // %s and anything else
			b.WriteString(arg)
		}
	}
	io.WriteString(sh.stdout, b.String())
	return 0, nil
}

func unescape(s string) string {
	r := strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\\`, `\`, `\r`, "\r", `\0`, "\x00")
	return r.Replace(s)
}

func biCat(sh *shell, args []string) (int32, error) {
	if len(args) == 0 || (len(args) == 1 && args[0] == "-") {
		return 0, sh.copyStdin()
	}
	var st int32
	for _, f := range args {
		data, err := sh.files(f)
		if err != nil {
			fmt.Fprintf(sh.stderr, "cat: can't open '%s': %v\n", f, err)
			st = 1
			continue
		}
		sh.stdout.Write(data)
	}
	return st, nil
}

func biEnv(sh *shell, _ []string) (int32, error) {
	for _, kv := range sh.env.list() {
		fmt.Fprintln(sh.stdout, kv)
	}
	return 0, nil
}

func biPrintenv(sh *shell, args []string) (int32, error) {
	if len(args) == 0 {
		return biEnv(sh, nil)
	}
	var st int32
	for _, k := range args {
		v, ok := sh.env.get(k)
		if !ok {
			st = 1
			continue
		}
		fmt.Fprintln(sh.stdout, v)
	}
	return st, nil
}

func biExport(sh *shell, args []string) (int32, error) {
	for _, a := range args {
		sh.assign(a)
	}
	return 0, nil
}

func biExit(sh *shell, args []string) (int32, error) {
	code := sh.status
	if len(args) > 0 {
		n, err := strconv.Atoi(args[0])
		if err != nil {
			fmt.Fprintf(sh.stderr, "sh: exit: Illegal number: %s\n", args[0])
			return 2, nil
		}
		code = int32(n & 0xff) // exit statuses are 8 bits, as in a real shell
	}
	return 0, &exitError{code: code}
}

// parseSleep accepts what busybox sleep accepts: N, N.N, suffixes s m h d,
// and "infinity" (returned as -1).
func parseSleep(s string) (time.Duration, error) {
	if s == "infinity" || s == "inf" {
		return -1, nil
	}
	unit := time.Second
	switch {
	case strings.HasSuffix(s, "s"):
		s = s[:len(s)-1]
	case strings.HasSuffix(s, "m"):
		s, unit = s[:len(s)-1], time.Minute
	case strings.HasSuffix(s, "h"):
		s, unit = s[:len(s)-1], time.Hour
	case strings.HasSuffix(s, "d"):
		s, unit = s[:len(s)-1], 24*time.Hour
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("invalid number '%s'", s)
	}
	return time.Duration(f * float64(unit)), nil
}

func biSleep(sh *shell, args []string) (int32, error) {
	if len(args) == 0 {
		fmt.Fprintln(sh.stderr, "sleep: missing operand")
		return 1, nil
	}
	var total time.Duration
	for _, a := range args {
		d, err := parseSleep(a)
		if err != nil {
			fmt.Fprintf(sh.stderr, "sleep: %v\n", err)
			return 1, nil
		}
		if d < 0 {
			total = -1
			break
		}
		total += d
	}
	return 0, sh.wait(total)
}

// parseSignal accepts TERM, SIGTERM, term or 15.
func parseSignal(s string) (int, bool) {
	up := strings.TrimPrefix(strings.ToUpper(s), "SIG")
	if n, err := strconv.Atoi(up); err == nil {
		return n, n > 0 && n < 65
	}
	if n := unix.SignalNum("SIG" + up); n != 0 {
		return int(n), true
	}
	return 0, false
}

func biTrap(sh *shell, args []string) (int32, error) {
	if len(args) < 2 {
		fmt.Fprintln(sh.stderr, "trap: usage: trap ACTION SIGNAL...")
		return 1, nil
	}
	var act trapAction
	switch args[0] {
	case "":
		act.ignore = true
	case "-":
	default:
		l, err := parseScript(args[0])
		if err != nil {
			fmt.Fprintf(sh.stderr, "trap: %v\n", err)
			return 2, nil
		}
		act.handler = l
	}
	var st int32
	for _, s := range args[1:] {
		n, ok := parseSignal(s)
		if !ok || n == sigKILL {
			fmt.Fprintf(sh.stderr, "trap: %s: bad signal\n", s)
			st = 1
			continue
		}
		if args[0] == "-" {
			delete(sh.traps, n)
		} else {
			sh.traps[n] = act
		}
	}
	return st, nil
}

// handleSignal applies a signal: nil means "keep going".
func (sh *shell) handleSignal(m signalMsg) error {
	if m.exit != nil {
		sh.exitReason = m.reason
		return &exitError{code: *m.exit}
	}
	if m.sig == sigKILL {
		return &exitError{code: 128 + sigKILL}
	}
	t, trapped := sh.traps[m.sig]
	switch {
	case !trapped:
		return &exitError{code: int32(128 + m.sig)}
	case t.ignore:
		return nil
	default:
		saved := sh.status
		err := sh.runList(t.handler)
		sh.status = saved
		return err
	}
}

// wait blocks for d (forever if d < 0), handling
// signals meanwhile. A context cancel (runtime closed, container gone,
// exec timeout) kills the shell like SIGKILL.
func (sh *shell) wait(d time.Duration) error {
	sh.blocked = true
	var timeout <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	for {
		select {
		case <-timeout:
			return nil
		case <-sh.ctx.Done():
			return &exitError{code: 128 + sigKILL}
		case m := <-sh.sigs:
			if err := sh.handleSignal(m); err != nil {
				return err
			}
		}
	}
}

// copyStdin copies stdin to stdout until EOF (cat with no arguments).
func (sh *shell) copyStdin() error {
	for {
		data, eof, err := sh.readStdin()
		if err != nil {
			return err
		}
		sh.stdout.Write(data)
		if eof {
			return nil
		}
	}
}

// readStdin returns the next chunk of stdin, waiting for it while still
// handling signals.
func (sh *shell) readStdin() (data []byte, eof bool, err error) {
	if sh.stdin == nil || sh.stdin.eof {
		return nil, true, nil
	}
	sh.blocked = true
	for {
		select {
		case b, ok := <-sh.stdin.ch:
			if !ok {
				sh.stdin.eof = true
				return nil, true, nil
			}
			return b, false, nil
		case <-sh.ctx.Done():
			return nil, false, &exitError{code: 128 + sigKILL}
		case m := <-sh.sigs:
			if err := sh.handleSignal(m); err != nil {
				return nil, false, err
			}
		}
	}
}

// repl reads commands from stdin, one line at a time. With a TTY it is a
// small line editor (echo, backspace, Ctrl-C, Ctrl-D) because the client
// terminal is in raw mode and expects the "pty" to echo.
func (sh *shell) repl() error {
	tty := sh.tty
	prompt := func() {
		if tty {
			io.WriteString(sh.stdout, "/ # ")
		}
	}
	prompt()
	var line []byte
	for {
		data, eof, err := sh.readStdin()
		if err != nil {
			return err
		}
		for _, c := range data {
			switch {
			case c == '\r' || c == '\n':
				if tty {
					io.WriteString(sh.stdout, "\n")
				}
				if err := sh.runLine(string(line)); err != nil {
					return err
				}
				line = line[:0]
				prompt()
			case tty && (c == 0x7f || c == 0x08):
				if len(line) > 0 {
					line = line[:len(line)-1]
					io.WriteString(sh.stdout, "\b \b")
				}
			case tty && c == 0x03: // Ctrl-C
				io.WriteString(sh.stdout, "^C\n")
				line = line[:0]
				prompt()
			case tty && c == 0x04: // Ctrl-D
				if len(line) == 0 {
					io.WriteString(sh.stdout, "\n")
					return &exitError{code: sh.status}
				}
			default:
				line = append(line, c)
				if tty {
					sh.stdout.Write([]byte{c})
				}
			}
		}
		if eof {
			if len(bytes.TrimSpace(line)) > 0 {
				if err := sh.runLine(string(line)); err != nil {
					return err
				}
			}
			return &exitError{code: sh.status}
		}
	}
}

func (sh *shell) runLine(s string) error {
	l, err := parseScript(s)
	if err != nil {
		fmt.Fprintf(sh.stderr, "sh: %v\n", err)
		sh.status = 2
		return nil
	}
	return sh.runList(l)
}

// envList is an ordered environment (env prints it in order).
type envList struct{ kv []string }

func (e *envList) get(k string) (string, bool) {
	for i := len(e.kv) - 1; i >= 0; i-- {
		if name, v, _ := strings.Cut(e.kv[i], "="); name == k {
			return v, true
		}
	}
	return "", false
}

func (e *envList) set(k, v string) {
	for i, kv := range e.kv {
		if name, _, _ := strings.Cut(kv, "="); name == k {
			e.kv[i] = k + "=" + v
			return
		}
	}
	e.kv = append(e.kv, k+"="+v)
}

func (e *envList) list() []string { return e.kv }

// chanReader turns a blocking io.Reader into a channel the shell can
// select on together with signals. Its goroutine ends when the reader
// returns an error (the stream closed) or stop is called.
type chanReader struct {
	ch   chan []byte
	done chan struct{}
	eof  bool // only touched by the shell goroutine
}

func newChanReader(r io.Reader) *chanReader {
	c := &chanReader{ch: make(chan []byte), done: make(chan struct{})}
	go func() {
		defer close(c.ch)
		for {
			b := make([]byte, 4096)
			n, err := r.Read(b)
			if n > 0 {
				select {
				case c.ch <- b[:n]:
				case <-c.done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return c
}

// stop releases the reader goroutine if it is waiting to hand over data.
// A goroutine blocked inside Read ends when its stream is closed, which the
// streaming server does as soon as the exec returns.
func (c *chanReader) stop() { close(c.done) }
