package readmerun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"

	"kubelet-labs/internal/checkout"
	"kubelet-labs/internal/critest"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/testenv"
)

// Session is a learner's checkout and terminal: a fresh copy of the
// repository, a shell environment that carries over from block to block
// (an `export` in one block holds in the next), and the programs left
// running in the background.
type Session struct {
	// Dir is the copy of the repository the commands run in.
	Dir string
	// Timeout of a block without one of its own.
	Timeout time.Duration
	// RealPath is the repository the copy was made from: in output, both
	// paths read as /path/to/kubelet-labs, as the READMEs show them.
	RealPath string

	envFile string
	// cluster's own names in output, and lab 00's names the READMEs show
	// instead (UseCluster)
	clusterNames *strings.Replacer
	sessions     []*background // backgrounds that live until Close
	learner      *learner      // who types the commands (nil: this process's user)
	sudoErr      error         // nil: not tried yet; errSudoWorks: it works
}

// Shown is how the READMEs write the path of the learner's checkout.
const Shown = "/path/to/kubelet-labs"

// NewSession copies the repository at root (its files as git sees them,
// uncommitted ones included; no .labs) into a short temporary folder — the
// mock's sockets live under .labs/ and a socket path must stay under 108
// bytes — and seeds the copy's .labs/bin with copies of the built binaries
// in binDir (lab 00's README says the first start builds them; the runner
// does not spend 8 minutes proving it again). The containerd of labs 11+ is
// root's, started with `sudo scripts/containerd-up.sh` in root's tree, where
// the labs find it from any checkout; the runner types that command too,
// through real sudo, as the learner.
func NewSession(tb testing.TB, root, binDir string) *Session {
	tb.Helper()
	for _, d := range sweepStaleSessions(os.TempDir()) {
		tb.Logf("removed %s and ended what ran in it: a README run that died left it", d)
	}
	dir, err := os.MkdirTemp("", "readme-")
	if err != nil {
		tb.Fatal(err)
	}
	lock, err := lockSession(dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { lock.Close() })
	s := &Session{Dir: filepath.Join(dir, "kubelet-labs"), Timeout: 15 * time.Minute, RealPath: root, envFile: filepath.Join(dir, "env")}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if err := checkout.Copy(root, s.Dir); err != nil {
		tb.Fatal(err)
	}
	bin := filepath.Join(s.Dir, ".labs", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		tb.Fatal(err)
	}
	entries, err := os.ReadDir(binDir)
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || strings.HasSuffix(e.Name(), ".lock") {
			continue // containerd's build folder, locks
		}
		// a copy, not a hard link: the copy becomes the learner's, and a
		// link would hand them the file root runs next from binDir
		if err := copyFile(filepath.Join(binDir, e.Name()), filepath.Join(bin, e.Name())); err != nil {
			tb.Fatal(err)
		}
	}
	if s.learner, err = lookupLearner(); err != nil {
		tb.Fatal(err)
	}
	if s.learner != nil {
		if err := s.learner.give(s.Dir); err != nil {
			tb.Fatal(err)
		}
		tb.Logf("the READMEs' commands run as %s (uid %d), in %s", s.learner.name, s.learner.uid, s.Dir)
	}
	return s
}

// UseCluster starts the learner's terminal with KUBECONFIG set to a copy of
// kubeconfig (theirs, next to their checkout) and the checkout's
// .labs/bin on PATH, as the two lines lab 00 prints would: the READMEs
// then run against that cluster (a kind cluster) instead of lab 00's.
//
// The READMEs show lab 00's names where a lab prints the cluster's: the
// admin kubeconfig's path, and the name of the CA that signs the nodes'
// certificates (lab 00's kubelet-labs-ca, kubeadm's "kubernetes"). In the
// output, the cluster's ones read as lab 00's, in the few forms the labs
// print them; everything else is compared as it is.
func (s *Session) UseCluster(kubeconfig string) error {
	dst := filepath.Join(filepath.Dir(s.Dir), "cluster.kubeconfig")
	if err := copyFile(kubeconfig, dst); err != nil {
		return err
	}
	if err := os.Chmod(dst, 0o600); err != nil {
		return err
	}
	env := fmt.Sprintf("export KUBECONFIG=%q\nexport PATH=%q:\"$PATH\"\n", dst, filepath.Join(s.Dir, ".labs", "bin"))
	if err := os.WriteFile(s.envFile, []byte(env), 0o644); err != nil {
		return err
	}
	if s.learner != nil {
		for _, p := range []string{dst, s.envFile} {
			if err := os.Lchown(p, int(s.learner.uid), int(s.learner.gid)); err != nil {
				return err
			}
		}
	}
	ca, err := clusterCAName(kubeconfig)
	if err != nil {
		return err
	}
	const lab00CA = "kubelet-labs-ca" // internal/controlplane/pki.go: "kubelet-labs-" + CAName
	s.clusterNames = strings.NewReplacer(
		dst, filepath.Join(s.Dir, ".labs", "admin.kubeconfig"),
		"issued by "+ca+",", "issued by "+lab00CA+",", // labs 01, 04
		`issued by "`+ca+`"`, `issued by "`+lab00CA+`"`, // lab 14
		"issuer "+ca+"\n", "issuer "+lab00CA+"\n", // labs 04, 05
		"issuer=CN = "+ca+"\n", "issuer=CN = "+lab00CA+"\n", // openssl x509 -issuer
	)
	return nil
}

// clusterCAName is the common name of the CA in kubeconfig's current
// cluster.
func clusterCAName(kubeconfig string) (string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return "", err
	}
	data := cfg.TLSClientConfig.CAData
	if len(data) == 0 && cfg.TLSClientConfig.CAFile != "" {
		if data, err = os.ReadFile(cfg.TLSClientConfig.CAFile); err != nil {
			return "", err
		}
	}
	certs, err := certutil.ParseCertsPEM(data)
	if err != nil || len(certs) == 0 {
		return "", fmt.Errorf("%s: no CA certificate in its current cluster (%v)", kubeconfig, err)
	}
	return certs[0].Subject.CommonName, nil
}

// script wraps a block: the environment of the blocks before it, and this
// block's environment saved for the next one when it ends.
func (s *Session) script(body string, strict bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[ -f %q ] && source %q 2>/dev/null\n", s.envFile, s.envFile)
	fmt.Fprintf(&b, "trap 'export -p > %q.new && mv %q.new %q' EXIT\n", s.envFile, s.envFile, s.envFile)
	if strict {
		b.WriteString("set -e -o pipefail\n")
	}
	b.WriteString(body)
	return b.String()
}

// command is bash running script in the checkout, in a process group of its
// own (Ctrl-C goes to the whole group, as a terminal sends it).
func (s *Session) command(script string) *exec.Cmd {
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = s.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "KUBECONFIG", "LABS_STATE_DIR", "CONTAINER_RUNTIME_ENDPOINT", "GOFLAGS":
			continue // a learner's fresh terminal has none of ours
		}
		env = append(env, kv)
	}
	env = append(env, "GOFLAGS=-buildvcs=false")
	if s.learner != nil {
		// the learner's own terminal: a login environment, nothing of root's
		env = s.learner.apply(cmd.SysProcAttr)
	}
	cmd.Env = env
	return cmd
}

// shownPaths turns the checkout's real paths into the one the READMEs show.
func (s *Session) shownPaths(out string) string {
	if s.clusterNames != nil {
		out = s.clusterNames.Replace(out)
	}
	out = strings.ReplaceAll(out, s.Dir, Shown)
	if s.RealPath != "" {
		out = strings.ReplaceAll(out, s.RealPath, Shown)
	}
	return out
}

// Run runs one README's blocks, in order; it fails t at the first block
// that does not do what the README says, and stops the README's background
// programs at the end.
func (s *Session) Run(t *testing.T, blocks []Block) {
	var local []*background
	defer func() {
		for i := len(local) - 1; i >= 0; i-- {
			local[i].stop(t, s)
		}
	}()
	for _, b := range blocks {
		timeout := b.Timeout
		if timeout == 0 {
			timeout = s.Timeout
		}
		switch {
		case b.Kind == Skip:
			t.Logf("line %d: not run (%s):\n%s", b.Line, b.Reason, b.Script)
		case b.Lab00 && s.clusterNames != nil:
			t.Logf("line %d: not run (it shows lab 00's cluster; the README says what another cluster does):\n%s", b.Line, b.Script)
		case b.Kind == Run:
			s.runBlock(t, b, timeout)
		case b.Kind == Background:
			bg := s.start(t, b, timeout)
			if b.Session {
				s.sessions = append(s.sessions, bg)
			} else {
				local = append(local, bg)
			}
		}
		if t.Failed() {
			return
		}
	}
}

// Close stops the session's background programs (lab 00), last first.
func (s *Session) Close(t *testing.T) {
	for i := len(s.sessions) - 1; i >= 0; i-- {
		s.sessions[i].stop(t, s)
	}
	s.sessions = nil
}

func (s *Session) runBlock(t *testing.T, b Block, timeout time.Duration) {
	t.Helper()
	if typesSudo(b.Script) && !s.canSudo(t, b) {
		return
	}
	cmd := s.command(s.script(b.Script, b.Exit == 0))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("line %d: %v", b.Line, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("line %d: still running after %s (a program that stays in the foreground needs <!-- run: background ready=\"…\" -->):\n%s\noutput:\n%s", b.Line, timeout, b.Script, out.String())
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // anything it left behind
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("line %d: %v", b.Line, err)
	}
	shown := s.shownPaths(out.String())
	t.Logf("line %d (%s, exit %d):\n$ %s%s", b.Line, time.Since(start).Round(time.Millisecond), code, strings.ReplaceAll(strings.TrimRight(b.Script, "\n"), "\n", "\n$ "), indent(shown))
	if code != b.Exit {
		t.Fatalf("line %d: exit code %d, the README says %d:\n%s\noutput:\n%s", b.Line, code, b.Exit, b.Script, shown)
	}
	if b.Output != nil {
		if err := Match(*b.Output, shown); err != nil {
			t.Fatalf("line %d: the output the README shows (line %d) is not what came out: %v\nreal output:\n%s", b.Line, b.OutputLine, err, shown)
		}
	}
}

// background is a program a README leaves running.
type background struct {
	b    Block
	cmd  *exec.Cmd
	out  *testenv.SyncBuffer
	done chan struct{}
	err  error
}

func (s *Session) start(t *testing.T, b Block, timeout time.Duration) *background {
	t.Helper()
	bg := &background{b: b, out: &testenv.SyncBuffer{}, done: make(chan struct{})}
	// A terminal sends Ctrl-C to the program in the foreground, not to the
	// shell that started it: exec the command, so no shell stands between
	// (bash waiting on `go run` turns a clean exit into status 1).
	script := strings.TrimSpace(b.Script)
	if strings.Contains(script, "\n") {
		t.Fatalf("line %d: a background block holds one command (what runs in that terminal's foreground)", b.Line)
	}
	bg.cmd = s.command(fmt.Sprintf("[ -f %q ] && source %q 2>/dev/null\nexec %s\n", s.envFile, s.envFile, script))
	bg.cmd.Stdout, bg.cmd.Stderr = bg.out, bg.out
	if err := bg.cmd.Start(); err != nil {
		t.Fatalf("line %d: %v", b.Line, err)
	}
	go func() { bg.err = bg.cmd.Wait(); close(bg.done) }()
	deadline := time.After(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if strings.Contains(bg.out.String(), b.Ready) {
			t.Logf("line %d: running in the background, ready:\n$ %s%s", b.Line, strings.TrimRight(b.Script, "\n"), indent(s.shownPaths(bg.out.String())))
			return bg
		}
		select {
		case <-bg.done:
			t.Fatalf("line %d: exited (%v) before it printed %q:\n%s\noutput:\n%s", b.Line, bg.err, b.Ready, b.Script, s.shownPaths(bg.out.String()))
		case <-deadline:
			bg.kill()
			t.Fatalf("line %d: not ready (%q) after %s:\n%s\noutput:\n%s", b.Line, b.Ready, timeout, b.Script, s.shownPaths(bg.out.String()))
		case <-tick.C:
		}
	}
}

func (bg *background) kill() {
	_ = syscall.Kill(-bg.cmd.Process.Pid, syscall.SIGKILL)
	<-bg.done
}

// stop presses Ctrl-C, as the README tells the learner to: the program must
// end on its own, with exit 0, within a minute; then its whole output is
// compared with what the README shows.
func (bg *background) stop(t *testing.T, s *Session) {
	t.Helper()
	select {
	case <-bg.done:
		t.Errorf("line %d: ended before Ctrl-C (%v):\n%s", bg.b.Line, bg.err, s.shownPaths(bg.out.String()))
		return
	default:
	}
	_ = syscall.Kill(-bg.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-bg.done:
	case <-time.After(time.Minute):
		bg.kill()
		t.Errorf("line %d: still running a minute after Ctrl-C:\n%s", bg.b.Line, s.shownPaths(bg.out.String()))
		return
	}
	shown := s.shownPaths(bg.out.String())
	// `go run` itself exits 1 when it was interrupted, whatever the program
	// returned (cmd/go/internal/work/exec.go: base.Interrupted sets exit
	// status 1): there, a clean stop is one with no "error:" line, which is
	// how labenv.Main reports a failure.
	var exit *exec.ExitError
	goRunInterrupted := errors.As(bg.err, &exit) && exit.ExitCode() == 1 && strings.HasPrefix(strings.TrimSpace(bg.b.Script), "go run ")
	if bg.err != nil && !goRunInterrupted || strings.Contains(shown, "\nerror: ") {
		t.Errorf("line %d: %v after Ctrl-C (a lab cleans up and exits 0):\n%s", bg.b.Line, bg.err, shown)
	}
	if bg.b.Output != nil {
		if err := Match(*bg.b.Output, shown); err != nil {
			t.Errorf("line %d: the output the README shows (line %d) is not what came out: %v\nreal output:\n%s", bg.b.Line, bg.b.OutputLine, err, shown)
		}
	}
}

func indent(out string) string {
	if out == "" {
		return ""
	}
	return "\n    " + strings.ReplaceAll(strings.TrimRight(out, "\n"), "\n", "\n    ")
}

// typesSudo tells whether a block runs a command with sudo.
func typesSudo(script string) bool {
	for _, line := range strings.Split(script, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "sudo ") {
			return true
		}
	}
	return false
}

// canSudo: a block that types sudo runs it for real, as the learner,
// through the machine's sudo and its sudoers (secure_path and all), as a
// learner's terminal would. Where that user cannot sudo without a password
// prompt (nobody here to type it; an instructor's `make tour`), the block
// is not run: fine if what it starts already runs (the course's
// containerd, started by hand before), else the README skips from there
// on. Under CI=true it fails: CI puts its learner in sudoers.
func (s *Session) canSudo(t *testing.T, b Block) bool {
	t.Helper()
	if s.sudoErr == nil {
		out, err := s.command("sudo -n true").CombinedOutput()
		s.sudoErr = fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
		if err == nil {
			s.sudoErr = errSudoWorks
		}
	}
	if s.sudoErr == errSudoWorks {
		return true
	}
	envFile, _ := labruntime.EnvFile()
	_, noContainerd := os.Stat(envFile)
	why := fmt.Sprintf("line %d types sudo, and this user cannot sudo without a password here (sudo -n true: %v)", b.Line, s.sudoErr)
	if critest.InCI() {
		t.Fatalf("%s: CI types the READMEs' sudo lines as a learner in sudoers (.ci/run)", why)
	}
	critest.Require(t, noContainerd == nil && strings.Contains(b.Script, "containerd-up.sh"), "%s, and what it would start does not run (no %s)", why, envFile)
	t.Logf("%s: not run; the course's containerd runs already (%s)", why, envFile)
	return false
}

var errSudoWorks = errors.New("sudo works")
