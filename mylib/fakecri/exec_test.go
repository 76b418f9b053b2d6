package fakecri

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/internal/testenv"
)

func execSync(t *testing.T, r *Runtime, id string, timeout int64, cmd ...string) (*runtimeapi.ExecSyncResponse, error) {
	t.Helper()
	return r.ExecSync(tctx(t), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: timeout})
}

func TestExecSyncCommands(t *testing.T) {
	r := newRuntime(t)
	pod := podConfig("exec")
	pod.Hostname = "exec-host"
	pod.DnsConfig = &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"ns.svc.cluster.local"}, Options: []string{"ndots:5"}}
	cfg := ctrConfig("c")
	cfg.Envs = []*runtimeapi.KeyValue{{Key: "GREETING", Value: []byte("hello")}, {Key: "EMPTY", Value: []byte("")}}
	id := createStart(t, r, runPod(t, r, pod), cfg)

	cases := []struct {
		cmd          []string
		code         int32
		stdout       string
		stderrSubstr string
	}{
		{[]string{"echo", "hi"}, 0, "hi\n", ""},
		{[]string{"sh", "-c", "echo $GREETING from $HOSTNAME"}, 0, "hello from exec-host\n", ""},
		{[]string{"sh", "-c", "exit 7"}, 7, "", ""},
		{[]string{"printenv", "GREETING"}, 0, "hello\n", ""},
		{[]string{"cat", "/etc/hostname"}, 0, "exec-host\n", ""},
		{[]string{"cat", "/etc/resolv.conf"}, 0, "search ns.svc.cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n", ""},
		{[]string{"cat", "/proc/1/environ"}, 0, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\x00HOSTNAME=exec-host\x00GREETING=hello\x00EMPTY=\x00", ""},
		{[]string{"cat", "/nope"}, 1, "", "No such file"},
		{[]string{"sh", "-c", "nosuch"}, 127, "", "not found"},
		{[]string{"sh", "-c", "echo oops >&2; exit 3"}, 3, "", "oops\n"},
	}
	for _, c := range cases {
		resp, err := execSync(t, r, id, 0, c.cmd...)
		if err != nil {
			t.Errorf("%q: %v", c.cmd, err)
			continue
		}
		if resp.ExitCode != c.code || string(resp.Stdout) != c.stdout || !strings.Contains(string(resp.Stderr), c.stderrSubstr) {
			t.Errorf("%q: got %d %q %q, want %d %q (stderr ~%q)", c.cmd, resp.ExitCode, resp.Stdout, resp.Stderr, c.code, c.stdout, c.stderrSubstr)
		}
	}
	out, _ := execSync(t, r, id, 0, "env")
	if !strings.Contains(string(out.Stdout), "GREETING=hello\n") {
		t.Errorf("env: %q", out.Stdout)
	}
}

func TestExecSyncUnknownBinaryIsAnError(t *testing.T) {
	r := newRuntime(t)
	id := createStart(t, r, runPod(t, r, podConfig("p")), ctrConfig("c"))
	_, err := execSync(t, r, id, 0, "/usr/bin/nginx", "-v")
	wantCode(t, err, codes.Unknown, "executable file not found")
	_, err = execSync(t, r, id, 0)
	wantCode(t, err, codes.InvalidArgument, id)
}

func TestExecSyncTimeout(t *testing.T) {
	r := newRuntime(t)
	id := createStart(t, r, runPod(t, r, podConfig("p")), ctrConfig("c"))
	began := time.Now()
	_, err := execSync(t, r, id, 1, "sh", "-c", "echo start; sleep 3600")
	wantCode(t, err, codes.DeadlineExceeded, id)
	if took := time.Since(began); took < time.Second {
		t.Fatalf("returned after %s, before the 1s timeout", took)
	}
	// A command that finishes in time is unaffected by the timeout.
	resp, err := execSync(t, r, id, 5, "sleep", "0.05")
	if err != nil || resp.ExitCode != 0 {
		t.Fatalf("short sleep: %v %v", resp, err)
	}
}

func TestExecDiesWithItsContainer(t *testing.T) {
	r := newRuntime(t)
	id := createStart(t, r, runPod(t, r, podConfig("p")), ctrConfig("c"))
	done := make(chan *runtimeapi.ExecSyncResponse, 1)
	go func() {
		resp, err := r.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"sleep", "3600"}})
		if err != nil {
			t.Errorf("ExecSync: %v", err)
		}
		done <- resp
	}()
	testenv.PollTrue(t, "the exec to start", patient, func() bool { return r.execs.Load() == 1 })
	if err := r.SetContainerExited(id, 1, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case resp := <-done:
		if resp == nil || resp.ExitCode != 137 {
			t.Fatalf("exec exit %d, want 137", resp.GetExitCode())
		}
	case <-time.After(patient):
		t.Fatal("exec outlived its container")
	}
	_, err := execSync(t, r, id, 0, "true")
	wantCode(t, err, codes.FailedPrecondition, id)
}

func TestExecReadsMountedFiles(t *testing.T) {
	r := newRuntime(t)
	host := t.TempDir()
	os.WriteFile(filepath.Join(host, "token"), []byte("secret-token"), 0o600)
	os.MkdirAll(filepath.Join(host, "..2024_01_01"), 0o755)
	os.WriteFile(filepath.Join(host, "..2024_01_01", "key"), []byte("configmap value"), 0o644)
	os.Symlink("..2024_01_01", filepath.Join(host, "..data"))
	os.Symlink("..data/key", filepath.Join(host, "key")) // how the kubelet lays out ConfigMaps
	outside := filepath.Join(t.TempDir(), "outside")
	os.WriteFile(outside, []byte("must not be readable"), 0o644)
	os.Symlink(outside, filepath.Join(host, "escape"))

	cfg := ctrConfig("c")
	cfg.Mounts = []*runtimeapi.Mount{{ContainerPath: "/var/run/secrets/kubernetes.io/serviceaccount", HostPath: host, Readonly: true}}
	id := createStart(t, r, runPod(t, r, podConfig("p")), cfg)

	for path, want := range map[string]string{
		"/var/run/secrets/kubernetes.io/serviceaccount/token":                   "secret-token",
		"/var/run/secrets/kubernetes.io/serviceaccount/key":                     "configmap value",
		"/var/run/secrets/kubernetes.io/serviceaccount/../serviceaccount/token": "secret-token",
	} {
		resp, err := execSync(t, r, id, 0, "cat", path)
		if err != nil || resp.ExitCode != 0 || string(resp.Stdout) != want {
			t.Errorf("cat %s: %v %q %q", path, err, resp.GetStdout(), resp.GetStderr())
		}
	}
	for _, path := range []string{
		"/var/run/secrets/kubernetes.io/serviceaccount/escape",
		"/var/run/secrets/kubernetes.io/serviceaccount/../../../../" + outside,
	} {
		resp, err := execSync(t, r, id, 0, "cat", path)
		if err != nil || resp.ExitCode == 0 || bytes.Contains(resp.Stdout, []byte("must not")) {
			t.Errorf("cat %s escaped the mount: %v %q", path, err, resp.GetStdout())
		}
	}
	if st := ctrStatus(t, r, id); len(st.Mounts) != 1 || st.Mounts[0].HostPath != host {
		t.Errorf("mounts not in status: %v", st.Mounts)
	}
}

func TestExecHook(t *testing.T) {
	hook := func(_ context.Context, req ExecRequest) (int32, error) {
		if req.Cmd[0] != "custom" {
			return 0, ErrNotHandled
		}
		req.Stdout.Write([]byte("from hook " + req.ContainerID[:4]))
		return 5, nil
	}
	r := newRuntime(t, WithExecHook(hook))
	id := createStart(t, r, runPod(t, r, podConfig("p")), ctrConfig("c"))
	resp, err := execSync(t, r, id, 0, "custom")
	if err != nil || resp.ExitCode != 5 || string(resp.Stdout) != "from hook "+id[:4] {
		t.Fatalf("hook: %v %v", resp, err)
	}
	resp, err = execSync(t, r, id, 0, "echo", "builtin")
	if err != nil || string(resp.Stdout) != "builtin\n" {
		t.Fatalf("fallback: %v %v", resp, err)
	}
}

func TestCappedBuffer(t *testing.T) {
	b := &cappedBuffer{max: 10}
	n, err := b.Write([]byte("0123456789abcdef"))
	if n != 16 || err != nil || b.String() != "0123456789" {
		t.Fatalf("got %d %v %q", n, err, b.String())
	}
	b.Write([]byte("more"))
	if b.Len() != 10 {
		t.Fatalf("grew past the cap: %d", b.Len())
	}
}
