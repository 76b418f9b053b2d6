package mocksh

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// runShell runs argv in a fresh mock shell and returns status and output.
func runShell(t *testing.T, stdin string, argv ...string) (int32, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	c := Config{
		Stdout:   &out,
		Stderr:   &errb,
		Env:      []string{"HOME=/root", "NAME=world"},
		Hostname: "box",
		WorkDir:  "/",
	}
	if stdin != "" {
		c.Stdin = strings.NewReader(stdin)
	}
	sh := New(t.Context(), c)
	defer sh.Close()
	code, err := sh.Run(argv)
	if err != nil {
		t.Fatalf("%q: %v", argv, err)
	}
	return code, out.String(), errb.String()
}

func TestShellScripts(t *testing.T) {
	cases := []struct {
		script string
		code   int32
		out    string
	}{
		{`echo hello world`, 0, "hello world\n"},
		{`echo -n no newline`, 0, "no newline"},
		{`echo -e 'a\tb'`, 0, "a\tb\n"},
		{`echo "hi $NAME" 'no $NAME' \$NAME ${NAME}!`, 0, "hi world no $NAME $NAME world!\n"},
		{`echo "quote \" inside"`, 0, "quote \" inside\n"},
		{`exit 3`, 3, ""},
		{`exit 300`, 44, ""}, // 8-bit exit status
		{`false; echo $?`, 0, "1\n"},
		{`true && echo yes || echo no`, 0, "yes\n"},
		{`false && echo yes || echo no`, 0, "no\n"},
		{`false || exit 7; echo unreachable`, 7, ""},
		{"echo one\necho two # comment", 0, "one\ntwo\n"},
		{`X=1; export Y=2; echo $X$Y; printenv Y`, 0, "12\n2\n"},
		{`printf '%s=%d%%\n' cpu 42`, 0, "cpu=42%\n"},
		{`hostname; pwd`, 0, "box\n/\n"},
		{`printenv NAME MISSING`, 1, "world\n"},
		{`nosuchcmd`, 127, ""},
		{`sleep 0.01; echo slept`, 0, "slept\n"},
		{`false`, 1, ""},
		{`sh -c 'exit 5'`, 5, ""},
		{`cat /etc/passwd`, 1, ""},
		{`echo a; while false; do echo never; done; echo b`, 0, "a\nb\n"},
	}
	for _, c := range cases {
		code, out, _ := runShell(t, "", "sh", "-c", c.script)
		if code != c.code || out != c.out {
			t.Errorf("%s\n  got  %d %q\n  want %d %q", c.script, code, out, c.code, c.out)
		}
	}
}

func TestShellRedirections(t *testing.T) {
	cases := []struct{ script, out, err string }{
		{`echo oops >&2`, "", "oops\n"},
		{`echo oops 1>&2; echo fine`, "fine\n", "oops\n"},
		{`echo gone >/dev/null; echo kept`, "kept\n", ""},
		{`nosuch 2>/dev/null; echo $?`, "127\n", ""},
		{`nosuch 2>&1`, "sh: nosuch: not found\n", ""},
		{`nosuch 2>&1 >/dev/null`, "sh: nosuch: not found\n", ""}, // left to right, as in sh
		{`nosuch >/dev/null 2>&1`, "", ""},
		{`echo a>&2`, "", "a\n"},
		{`echo "2>&1"`, "2>&1\n", ""},
		{`echo 2 >&2`, "", "2\n"},
	}
	for _, c := range cases {
		_, out, errOut := runShell(t, "", "sh", "-c", c.script)
		if out != c.out || errOut != c.err {
			t.Errorf("%s\n  got  out %q err %q\n  want out %q err %q", c.script, out, errOut, c.out, c.err)
		}
	}
}

func TestShellRejectsWhatItCannotDo(t *testing.T) {
	for _, script := range []string{
		`echo a | grep a`, `echo a > /tmp/x`, `cat < /etc/hosts`, `echo >&3`, `>&2`, `sleep 1 &`, `echo $(date)`, "echo `date`",
		`if true; then echo; fi`, `echo 'unterminated`, `(echo sub)`, `while true; do echo`,
	} {
		code, out, errOut := runShell(t, "", "sh", "-c", script)
		if code != 2 || out != "" || errOut == "" {
			t.Errorf("%s: got %d %q %q, want exit 2 and an error message", script, code, out, errOut)
		}
	}
}

func TestShellDirectCommands(t *testing.T) {
	code, out, _ := runShell(t, "", "/bin/echo", "direct")
	if code != 0 || out != "direct\n" {
		t.Fatalf("got %d %q", code, out)
	}
	code, out, _ = runShell(t, "piped input", "cat")
	if code != 0 || out != "piped input" {
		t.Fatalf("cat stdin: %d %q", code, out)
	}
	code, out, _ = runShell(t, "echo from-repl\nexit 4\necho after\n", "sh")
	if code != 4 || out != "from-repl\n" {
		t.Fatalf("repl: %d %q", code, out)
	}
	if _, err := New(t.Context(), Config{}).Run([]string{"nginx"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown binary: %v", err)
	}
}

func TestShellSignals(t *testing.T) {
	run := func(script string, sigs ...Signal) int32 {
		t.Helper()
		ch := make(chan Signal, len(sigs))
		for _, s := range sigs {
			ch <- s
		}
		code, err := New(t.Context(), Config{Signals: ch}).Run([]string{"sh", "-c", script})
		if err != nil {
			t.Fatal(err)
		}
		return code
	}
	code42 := int32(42)
	cases := []struct {
		name   string
		script string
		sigs   []Signal
		want   int32
	}{
		{"TERM kills", "sleep 3600", []Signal{{Num: 15}}, 143},
		{"INT kills", "sleep 3600", []Signal{{Num: 2}}, 130},
		{"ignored TERM then KILL", "trap '' TERM; sleep 3600", []Signal{{Num: 15}, {Num: 9}}, 137},
		{"handler", "trap 'exit 9' TERM; sleep 3600", []Signal{{Num: 15}}, 9},
		{"handler resumes", "trap 'echo x' USR1; sleep 0.05; exit 6", []Signal{{Num: 10}}, 6},
		{"reset trap", "trap '' TERM; trap - TERM; sleep 3600", []Signal{{Num: 15}}, 143},
		{"forced exit", "trap '' TERM; sleep 3600", []Signal{{Exit: &code42}}, 42},
		{"KILL cannot be trapped", "trap '' KILL; sleep 3600", []Signal{{Num: 9}}, 137},
	}
	for _, c := range cases {
		if got := run(c.script, c.sigs...); got != c.want {
			t.Errorf("%s: exit %d, want %d", c.name, got, c.want)
		}
	}
}

func TestShellContextCancelKills(t *testing.T) {
	c, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	code, err := New(c, Config{}).Run([]string{"sh", "-c", "trap '' TERM; sleep 3600"})
	if err != nil || code != 137 {
		t.Fatalf("got %d %v, want 137", code, err)
	}
}

func TestParseSleep(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"1": time.Second, "0.5": 500 * time.Millisecond, "2m": 2 * time.Minute, "1h": time.Hour,
		"3s": 3 * time.Second, "1d": 24 * time.Hour, "infinity": -1,
	} {
		if got, err := parseSleep(in); err != nil || got != want {
			t.Errorf("parseSleep(%q) = %v %v, want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "1q"} {
		if _, err := parseSleep(bad); err == nil {
			t.Errorf("parseSleep(%q) accepted", bad)
		}
	}
}
