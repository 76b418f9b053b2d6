package testenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// KubectlCmd is kubectl (the one built with the control plane) as the
// admin of the package's control plane, ended after 2 minutes at most. It
// works after a test moved the state folder (LABS_STATE_DIR): the binaries
// are those the control plane started from.
func KubectlCmd(tb testing.TB, args ...string) *exec.Cmd {
	tb.Helper()
	cp := ControlPlane(tb)
	bin := sharedBinDir
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	tb.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.AdminKubeconfig())
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// Kubectl runs kubectl with stdin and returns what it printed and its exit
// code, as a learner in a terminal sees them.
func Kubectl(tb testing.TB, stdin string, args ...string) (stdout, stderr string, code int) {
	tb.Helper()
	cmd := KubectlCmd(tb, args...)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		tb.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errb.String(), code
}

var forwarding = regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> `)

// PortForwardGet runs `kubectl -n NS port-forward TARGET :PORT` and GETs
// path through the local port it picked, as `curl -s localhost:PORT/path`
// does. An empty ns is kubectl's default namespace.
func PortForwardGet(tb testing.TB, ns, target, port, path string) string {
	tb.Helper()
	args := []string{"port-forward", target, ":" + port}
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	cmd := KubectlCmd(tb, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	local := ""
	for local == "" && sc.Scan() {
		if m := forwarding.FindStringSubmatch(sc.Text()); m != nil {
			local = m[1]
		}
	}
	if local == "" {
		tb.Fatalf("kubectl port-forward %s :%s printed no local port", target, port)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://127.0.0.1:" + local + path)
	if err != nil {
		tb.Fatalf("GET %s through the forwarded port: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
