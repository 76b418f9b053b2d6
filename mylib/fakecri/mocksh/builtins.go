package mocksh

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The built-in commands (the package doc lists them).

type builtin func(sh *Shell, args []string) (int32, error)

var builtins map[string]builtin

func init() {
	// Assigned in init: built-ins reach back into the table (sleep waits,
	// a signal runs a trap handler, which calls built-ins), which a
	// package-level initializer would reject as an initialization cycle.
	builtins = map[string]builtin{
		"echo":     biEcho,
		"printf":   biPrintf,
		"cat":      biCat,
		"env":      biEnv,
		"printenv": biPrintenv,
		"hostname": func(sh *Shell, _ []string) (int32, error) { fmt.Fprintln(sh.stdout, sh.hostname); return 0, nil },
		"pwd":      func(sh *Shell, _ []string) (int32, error) { fmt.Fprintln(sh.stdout, sh.workDir); return 0, nil },
		"id": func(sh *Shell, _ []string) (int32, error) {
			fmt.Fprintf(sh.stdout, "uid=%d gid=%d\n", sh.uid, sh.gid)
			return 0, nil
		},
		"date": func(sh *Shell, _ []string) (int32, error) {
			fmt.Fprintln(sh.stdout, sh.now().UTC().Format(time.UnixDate))
			return 0, nil
		},
		"true":   func(*Shell, []string) (int32, error) { return 0, nil },
		":":      func(*Shell, []string) (int32, error) { return 0, nil },
		"false":  func(*Shell, []string) (int32, error) { return 1, nil },
		"exit":   biExit,
		"sleep":  biSleep,
		"trap":   biTrap,
		"export": biExport,
	}
}

// Commands names what the shell can run, for an error message that tells
// the user what the mock knows.
func Commands() string {
	return "sh -c, echo, printf, cat, env, printenv, hostname, pwd, id, date, true, false, sleep, exit, trap, export"
}

func biEcho(sh *Shell, args []string) (int32, error) {
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

func biPrintf(sh *Shell, args []string) (int32, error) {
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

func biCat(sh *Shell, args []string) (int32, error) {
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

func biEnv(sh *Shell, _ []string) (int32, error) {
	for _, kv := range sh.env.list() {
		fmt.Fprintln(sh.stdout, kv)
	}
	return 0, nil
}

func biPrintenv(sh *Shell, args []string) (int32, error) {
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

func biExport(sh *Shell, args []string) (int32, error) {
	for _, a := range args {
		sh.assign(a)
	}
	return 0, nil
}

func biExit(sh *Shell, args []string) (int32, error) {
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

func biSleep(sh *Shell, args []string) (int32, error) {
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

// ParseSignal accepts TERM, SIGTERM, term or 15 and returns the unix
// signal number.
func ParseSignal(s string) (int, bool) {
	up := strings.TrimPrefix(strings.ToUpper(s), "SIG")
	if n, err := strconv.Atoi(up); err == nil {
		return n, n > 0 && n < 65
	}
	if n := unix.SignalNum("SIG" + up); n != 0 {
		return int(n), true
	}
	return 0, false
}

func biTrap(sh *Shell, args []string) (int32, error) {
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
		n, ok := ParseSignal(s)
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
