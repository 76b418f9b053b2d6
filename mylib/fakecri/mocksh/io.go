package mocksh

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"time"
)

// Signals, waiting, stdin and the interactive REPL of the mock shell.

// handleSignal applies a signal: nil means "keep going".
func (sh *Shell) handleSignal(m Signal) error {
	if m.Exit != nil {
		sh.exitReason = m.Reason
		return &exitError{code: *m.Exit}
	}
	if m.Num == sigKILL {
		return &exitError{code: 128 + sigKILL}
	}
	t, trapped := sh.traps[m.Num]
	switch {
	case !trapped:
		return &exitError{code: int32(128 + m.Num)}
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
func (sh *Shell) wait(d time.Duration) error {
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
func (sh *Shell) copyStdin() error {
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
func (sh *Shell) readStdin() (data []byte, eof bool, err error) {
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
func (sh *Shell) repl() error {
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

func (sh *Shell) runLine(s string) error {
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
