// Command testsummary runs `go test -json` and prints what plain `go test`
// prints — one line per package, and the output of failed tests only — then
// a short summary that names every skipped test with its reason and every
// failed test. Without it a skip is invisible: `ok pkg 0.137s` looks the
// same whether the tests ran or skipped because containerd was absent.
//
//	go run ./internal/testsummary -race -count=1 ./... --- -C hack/envcheck -count=1 ./...
//
// Each group of arguments (separated by ---) is one `go test -json` run;
// "-C DIR" first runs it in DIR (another module). The exit code is the
// first non-zero exit of go test, or 1 if a test failed, else 0.
package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

func main() {
	groups := splitGroups(os.Args[1:])
	if len(groups) == 0 {
		fmt.Fprintln(os.Stderr, "usage: testsummary [-C DIR] GO_TEST_ARGS... [--- [-C DIR] GO_TEST_ARGS...]")
		os.Exit(2)
	}
	start := time.Now()
	s := newSummary(os.Stdout)
	exit := 0
	for _, g := range groups {
		code, err := runGroup(g, s)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			code = 2
		}
		if exit == 0 {
			exit = code
		}
	}
	s.print(time.Since(start))
	if exit == 0 && s.failedCount() > 0 {
		exit = 1
	}
	os.Exit(exit)
}

// group is one go test run.
type group struct {
	dir  string
	args []string
}

func splitGroups(args []string) []group {
	var out []group
	cur := group{dir: "."}
	flush := func() {
		if len(cur.args) > 0 {
			out = append(out, cur)
		}
		cur = group{dir: "."}
	}
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "---":
			flush()
		case args[i] == "-C" && len(cur.args) == 0 && i+1 < len(args):
			cur.dir = args[i+1]
			i++
		default:
			cur.args = append(cur.args, args[i])
		}
	}
	flush()
	return out
}

func runGroup(g group, s *summary) (int, error) {
	args := append([]string{"test", "-json"}, g.args...)
	if g.dir != "." {
		fmt.Fprintf(s.w, "\n== go %s (in %s)\n", strings.Join(args, " "), g.dir)
	} else {
		fmt.Fprintf(s.w, "== go %s\n", strings.Join(args, " "))
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = g.dir
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	s.read(stdout)
	io.Copy(io.Discard, stdout)
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), nil
	}
	return 0, err
}
