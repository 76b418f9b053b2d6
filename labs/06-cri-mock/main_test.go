package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mylib/fakecri"
)

// patient bounds waits for things that take milliseconds; generous so a
// loaded CI machine never flakes.
const patient = 30 * time.Second

// TestMain lets a test re-run this binary as the lab itself (LAB06_MAIN=1),
// to check exit codes and signal handling of the real main.
func TestMain(m *testing.M) {
	if os.Getenv("LAB06_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "lab06")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// startLab runs the lab in-process until the test ends, on a socket of its
// own, and checks at the end that it removed the socket.
func startLab(t *testing.T, o options) (*testenv.Lines, string) {
	t.Helper()
	o.socket = filepath.Join(shortDir(t), "mockcri.sock")
	t.Cleanup(func() { // runs after StartLab's own cleanup has stopped the lab
		if _, err := os.Stat(o.socket); !os.IsNotExist(err) {
			t.Errorf("socket %s left behind", o.socket)
		}
	})
	lab := testenv.StartLab(t, func(ctx context.Context, out io.Writer, ready func(*fakecri.Server)) error {
		return run(ctx, o, labenv.NewPrinter(out), ready)
	})
	return lab.Out, o.socket
}

// crictlPath returns a built crictl, building it once (under a file lock,
// since packages test in parallel) with scripts/build-crictl.sh. It never
// skips: without crictl the test fails and says how to build it.
func crictlPath(t *testing.T) string {
	t.Helper()
	root, err := state.Root()
	if err != nil {
		t.Fatal(err)
	}
	binDir, err := state.Ensure("bin")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(binDir, "crictl")
	how := "build it with: " + filepath.Join(root, "scripts", "build-crictl.sh")
	lock, err := os.OpenFile(filepath.Join(binDir, ".crictl.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	t.Logf("crictl missing at %s; building it (about a minute)", bin)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "build-crictl.sh"))
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building crictl failed: %v\n%s\n%s", err, b, how)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("crictl still missing at %s; %s", bin, how)
	}
	return bin
}

// TestCrictlAgainstTheLab is the lab's README walk-through, run by crictl
// (cri-tools v1.34.0) against the lab's socket.
func TestCrictlAgainstTheLab(t *testing.T) {
	crictl := crictlPath(t) // before LABS_STATE_DIR moves: crictl lives in the real state folder
	stateDir := shortDir(t)
	t.Setenv("LABS_STATE_DIR", stateDir)
	out, _ := startLab(t, options{})
	labDir := filepath.Join(stateDir, "06-cri-mock")

	cc := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), patient)
		defer cancel()
		// as the guide has it: crictl --config <the lab's crictl.yaml>
		cmd := exec.CommandContext(ctx, crictl, append([]string{"--config", filepath.Join(labDir, "crictl.yaml")}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("crictl %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
		return stdout.String()
	}
	want := func(what, got string, re string) {
		t.Helper()
		if !regexp.MustCompile(re).MatchString(got) {
			t.Fatalf("%s: output does not match %q:\n%s", what, re, got)
		}
	}
	exitCode := func(id string) string {
		return strings.TrimSpace(cc("inspect", "-o", "go-template", "--template", "{{.status.exitCode}} {{.status.reason}}", id))
	}

	want("version", cc("version"), `(?m)^RuntimeName:\s+fakecri$[\s\S]*^RuntimeApiVersion:\s+v1$`)
	var info struct {
		Status struct {
			Conditions []struct {
				Type   string `json:"type"`
				Status bool   `json:"status"`
			} `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(cc("info")), &info); err != nil || len(info.Status.Conditions) != 2 || !info.Status.Conditions[0].Status {
		t.Fatalf("info: %+v %v", info, err)
	}
	// the course's images, as on our containerd; a pull of one it has is
	// instant, as there
	images := cc("images")
	want("images", images, `(?m)^localhost/kubelet-labs/busybox\s+1\.35\.0\s`)
	want("images", images, `(?m)^localhost/kubelet-labs/pause\s+1\.0\s`)
	want("pull", cc("pull", labruntime.BusyboxImage), `Image is up to date for sha256:[0-9a-f]{64}`)

	pod := strings.TrimSpace(cc("runp", filepath.Join(labDir, "pod.json")))
	want("runp", pod, `^[0-9a-f]{64}$`)
	ctr := strings.TrimSpace(cc("create", pod, filepath.Join(labDir, "container.json"), filepath.Join(labDir, "pod.json")))
	want("create", ctr, `^[0-9a-f]{64}$`)
	cc("start", ctr)
	want("ps", cc("ps"), ctr[:13]+`\s+localhost/kubelet-labs/busybox:1\.35\.0\s+.*Running\s+hello\s+0\s+`+pod[:13]+`\s+hello\s+lab06`)
	want("pods", cc("pods"), pod[:13]+`\s+.*Ready\s+hello\s+lab06`)
	want("inspect", cc("inspect", ctr), `"state": "CONTAINER_RUNNING"`)
	want("inspectp", cc("inspectp", pod), `"ip": "10\.88\.`)

	want("exec -s", cc("exec", "-s", ctr, "sh", "-c", "echo hi from $HOSTNAME"), `^hi from hello\n`)
	want("exec (streaming)", cc("exec", ctr, "cat", "/etc/resolv.conf"), `nameserver 10\.96\.0\.10`)
	want("exec -i (stdin)", ccStdin(t, crictl, labDir, "piped through crictl\n", "exec", "-i", ctr, "cat"), `^piped through crictl\n$`)
	testenv.PollTrue(t, "the first log lines", patient, func() bool { return strings.Contains(cc("logs", ctr), "tick") })
	want("logs", cc("logs", ctr), `^hello from the mock runtime\ntick\n`)
	want("stats", cc("stats", "-a"), ctr[:13]+`\s+hello\s+[0-9.]+\s+[0-9.]+MB`)

	stub := strings.TrimSpace(cc("create", pod, filepath.Join(labDir, "ignore-sigterm.json"), filepath.Join(labDir, "pod.json")))
	cc("start", stub)
	testenv.PollTrue(t, "the stubborn container's first line", patient, func() bool { return strings.Contains(cc("logs", stub), "ignoring SIGTERM") })
	began := time.Now()
	cc("stop", "--timeout", "2", stub)
	if took := time.Since(began); took < 2*time.Second {
		t.Fatalf("stop --timeout 2 of a SIGTERM-ignoring container returned after %s", took)
	}
	if got := exitCode(stub); got != "137 Error" {
		t.Fatalf("stubborn container: %q, want 137 Error", got)
	}
	cc("stop", "--timeout", "20", ctr)
	if got := exitCode(ctr); got != "143 Error" {
		t.Fatalf("container: %q, want 143 Error", got)
	}
	want("ps -a", cc("ps", "-a", "--state", "exited", "-q"), ctr+"\n")

	cc("rm", ctr, stub)
	want("stopp", cc("stopp", pod), "Stopped sandbox "+pod)
	want("rmp", cc("rmp", pod), "Removed sandbox "+pod)
	if got := cc("pods", "-q"); got != "" {
		t.Fatalf("pods left: %q", got)
	}
	// The lab printed the calls as they arrived.
	for _, call := range []string{"RunPodSandbox", "CreateContainer", "StartContainer", "ExecSync", "Exec ", "StopContainer", "RemoveContainer", "StopPodSandbox", "RemovePodSandbox"} {
		if !strings.Contains(out.String(), call) {
			t.Errorf("lab output lacks %s", call)
		}
	}
}

func ccStdin(t *testing.T, crictl, labDir, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patient)
	defer cancel()
	cmd := exec.CommandContext(ctx, crictl, append([]string{"--config", filepath.Join(labDir, "crictl.yaml")}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("crictl %v: %v", args, err)
	}
	return string(b)
}

// labProcess runs this test binary as the lab's real main (TestMain),
// stopped when the test ends if it has not exited by then.
func labProcess(t *testing.T, stateDir string, args ...string) *testenv.Program {
	t.Helper()
	return testenv.StartProgram(t, os.Args[0], []string{"LAB06_MAIN=1", "LABS_STATE_DIR=" + stateDir}, args...)
}

// waitExit waits for the lab to exit on its own and returns its exit code.
func waitExit(t *testing.T, p *testenv.Program) int {
	t.Helper()
	if !p.WaitExit(patient) {
		t.Fatalf("lab did not exit within %s:\n%s", patient, p.Output())
	}
	return p.ExitCode()
}

func TestSIGTERMStopsCleanly(t *testing.T) {
	dir := shortDir(t)
	sock := filepath.Join(dir, "cri.sock")
	p := labProcess(t, dir, "-socket", sock)
	p.WaitFor(t, "CRI calls appear below", patient)
	p.Signal(syscall.SIGTERM)
	if code := waitExit(t, p); code != 0 {
		t.Fatalf("exit code %d after SIGTERM:\n%s", code, p.Output())
	}
	for _, f := range []string{sock, filepath.Join(dir, "cri-control.sock")} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Fatalf("%s left behind", f)
		}
	}
}

func TestSocketInUseFails(t *testing.T) {
	_, sock := startLab(t, options{})
	p := labProcess(t, shortDir(t), "-socket", sock)
	if code := waitExit(t, p); code == 0 {
		t.Fatalf("second lab on a live socket exited 0:\n%s", p.Output())
	}
	if !strings.Contains(p.Output(), "is in use by pid ") {
		t.Fatalf("unclear error:\n%s", p.Output())
	}
}

func TestUnwritableFolderFails(t *testing.T) {
	dir := shortDir(t)
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	// A folder under a regular file can never be created, even by root
	// (for whom permission bits do not stop anything).
	for name, c := range map[string]struct{ state, socket, want string }{
		"socket folder": {filepath.Join(dir, "state"), filepath.Join(file, "cri.sock"), "cannot create socket folder"},
		"state folder":  {filepath.Join(file, "state"), filepath.Join(dir, "cri.sock"), "not usable"},
	} {
		p := labProcess(t, c.state, "-socket", c.socket)
		if code := waitExit(t, p); code == 0 || !strings.Contains(p.Output(), c.want) {
			t.Errorf("%s: exit %d, output:\n%s", name, code, p.Output())
		}
	}
}

// TestSharedFolderFails: a socket in a folder others may write (like
// /tmp) is refused with one line saying why; nothing is left there.
func TestSharedFolderFails(t *testing.T) {
	dir := shortDir(t)
	shared := filepath.Join(dir, "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(shared, "cri.sock")
	p := labProcess(t, filepath.Join(dir, "state"), "-socket", sock)
	if code := waitExit(t, p); code != 1 {
		t.Fatalf("exit %d on a socket in a world-writable folder:\n%s", code, p.Output())
	}
	want := "error: socket folder " + shared + " is writable by others (drwxrwxrwx"
	if out := strings.TrimSpace(p.Output()); !strings.HasPrefix(out, want) || strings.Contains(out, "\n") {
		t.Errorf("want one line starting %q, got:\n%s", want, out)
	}
	if entries, _ := os.ReadDir(shared); len(entries) != 0 {
		t.Errorf("left %v in the shared folder", entries)
	}
}
