// Package mocksh is the tiny shell the mock container runtime (fakecri)
// runs container commands and exec'd commands with: fakecri starts no
// processes, so a container's "process" is one goroutine interpreting its
// command line here. It exists so the teaching containers behave as they
// do on containerd — `sh -c 'echo hello; sleep 3; exit 3'` prints, waits
// and exits 3; a trap with an empty action makes a container ignore
// SIGTERM until the kubelet's SIGKILL — without a real shell, image or
// kernel.
//
// It is a teaching mock, not a POSIX shell. It supports exactly:
//
//	echo [-n] [-e] ARGS    printf FORMAT ARGS (%s %d %%, \n \t escapes)
//	cat [FILE...]          no FILE: copy stdin; files: Config.ReadFile
//	env, printenv [NAME]   hostname, pwd, id, date, true, :, false
//	sleep N|Ns|Nm|infinity exit [N]
//	trap ACTION SIG...     ACTION '' ignores, '-' resets, else a handler script
//	NAME=VALUE, export NAME=VALUE, $NAME ${NAME} $? in words, '…' "…" \ quoting
//	CMD >&2, CMD 2>&1, CMD >/dev/null, CMD 2>/dev/null
//	LIST ; LIST, CMD && CMD, CMD || CMD, while LIST; do LIST; done
//	sh|bash -c SCRIPT      sh with no -c: a line-by-line REPL on stdin
//
// The built-ins may also be run directly (argv ["echo","hi"] or
// ["/bin/cat","/etc/hostname"]). Everything else — pipes, file
// redirection, if/for/case, subshells, command substitution, background
// jobs — is refused with exit 2 and a "not supported by the mock shell"
// message rather than half-handled, and an argv naming anything but a
// built-in or a shell is ErrNotFound: fakecri runs such a command (nginx,
// /pause) as a daemon (Shell.Daemon), and refuses it in an exec.
//
// Signals arrive on Config.Signals and are looked at in blocking points
// (sleep, reading stdin, waiting forever, each loop iteration) — so a
// script's first commands (its trap) always run before a signal is looked
// at, as on a real machine where the shell starts long before the
// kubelet's StopContainer arrives. Unlike a real PID 1, a signal without a
// trap terminates the shell at once (exit 128+n) — the behaviour of a
// well-behaved process, which is what the stop-escalation lessons need. A
// trap handler runs as soon as the signal arrives. Cancelling the
// context kills the shell like SIGKILL (137).
//
// Files: parse.go (grammar), shell.go (interpreter and API), builtins.go
// (commands), io.go (signals, waiting, stdin, the REPL).
package mocksh
