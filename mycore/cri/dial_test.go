package cri

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
)

// These tests need no runtime: they check that each way of failing to reach
// one produces an error a learner can act on.

// startHint stands for the command a caller names with WithStartHint.
const startHint = "sudo ./start-the-runtime"

func dialErr(t *testing.T, endpoint string, opts ...Option) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, endpoint, append([]Option{WithTimeout(5 * time.Second)}, opts...)...)
	if err == nil {
		c.Close()
		t.Fatalf("Dial(%s) succeeded, want an error", endpoint)
	}
	t.Logf("error shown to the learner:\n%v", err)
	return err
}

func wantMsg(t *testing.T, err error, kind error, parts ...string) {
	t.Helper()
	if kind != nil && !errors.Is(err, kind) {
		t.Errorf("error %v is not %v", err, kind)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not mention %q", err, p)
		}
	}
}

func TestDialMissingSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "containerd.sock")
	err := dialErr(t, "unix://"+sock, WithStartHint(startHint))
	wantMsg(t, err, ErrNotReachable, "containerd is not reachable at "+sock+": the socket does not exist; start it with: "+startHint)
}

// Without WithStartHint the error names no command: this package cannot
// know how its user starts a runtime.
func TestDialWithoutStartHintNamesNoCommand(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "containerd.sock")
	err := dialErr(t, "unix://"+sock)
	wantMsg(t, err, ErrNotReachable, "containerd is not reachable at "+sock+": the socket does not exist")
	if strings.Contains(err.Error(), "start it with") || strings.Contains(err.Error(), ".sh") {
		t.Errorf("error %q names a command no caller gave", err)
	}
}

func TestDialStaleSocket(t *testing.T) {
	// What a SIGKILLed containerd leaves: the socket file, nobody listening.
	sock := filepath.Join(t.TempDir(), "containerd.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	err = dialErr(t, sock, WithStartHint(startHint)) // a bare path works too
	wantMsg(t, err, ErrNotReachable, "nothing listens", "start it with: "+startHint)
}

func TestDialNotASocket(t *testing.T) {
	f := filepath.Join(t.TempDir(), "cri.sock")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	wantMsg(t, dialErr(t, "unix://"+f), ErrNotReachable, "not a unix socket")
}

// A gRPC server without runtime.v1 services answers like a runtime that
// only speaks the removed v1alpha2 API: Unimplemented, "unknown service
// runtime.v1.RuntimeService".
func TestDialWrongAPIVersion(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "old.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	wantMsg(t, dialErr(t, "unix://"+sock), ErrWrongAPI, "does not serve CRI v1", "v1alpha2")
}

// Root may connect to any socket, so the real EACCES cannot be produced in
// a root test run; check the classification of the error text instead.
func TestExplainPermissionDenied(t *testing.T) {
	raw := errors.New(`rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial unix /x/containerd.sock: connect: permission denied"`)
	err := explain("unix:///x/containerd.sock", raw, startHint)
	wantMsg(t, err, ErrPermission, "permission denied on /x/containerd.sock", "run `"+startHint+"` from your own account", "root")
	err = explain("unix:///x/containerd.sock", raw, "")
	wantMsg(t, err, ErrPermission, "permission denied on /x/containerd.sock", "root")
}

func TestDialUnsupportedScheme(t *testing.T) {
	err := dialErr(t, "tcp://127.0.0.1:8989")
	if err == nil {
		t.Fatal("want an error for tcp://")
	}
}

// The real thing: a non-root process dialing containerd's socket (mode
// 0660, owner root). Needs root to set up; the test binary re-runs itself
// as nobody for the dial.
func TestDialPermissionDeniedAsNobody(t *testing.T) {
	if sock := os.Getenv("CRI_TEST_DIAL_AS_NOBODY"); sock != "" {
		err := dialErr(t, "unix://"+sock)
		wantMsg(t, err, ErrPermission, "permission denied on "+sock)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a root-only socket and switch to nobody")
	}
	dir, err := os.MkdirTemp("", "cri-perm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "containerd.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.Chmod(sock, 0o660); err != nil {
		t.Fatal(err)
	}
	// go test's build folder is root's (0700): give nobody a copy it can run.
	bin := filepath.Join(dir, "cri.test")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestDialPermissionDeniedAsNobody$", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CRI_TEST_DIAL_AS_NOBODY="+sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	t.Logf("as nobody:\n%s", out)
}
