package testenv

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"kubelet-labs/internal/controlplane"
	"kubelet-labs/internal/state"
)

// Labs are tested as learners run them: as built programs with flags,
// output and Ctrl-C. BuildLab builds one (cached per test binary) and
// StartProgram runs it.

var (
	buildMu sync.Mutex
	built   = map[string]string{}
)

// BuildLab builds the package at pkg (e.g. "./labs/01-fake-node", relative
// to the repository root) with the version stamp release builds get (and
// -race when the test runs with -race), and returns the binary's path. The binary is removed by Main when the test
// binary ends, so packages that build labs must use testenv.Main.
func BuildLab(tb testing.TB, pkg string) string {
	tb.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[pkg]; ok {
		return p
	}
	root, err := state.Root()
	if err != nil {
		tb.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "lab-bin-")
	if err != nil {
		tb.Fatal(err)
	}
	out := filepath.Join(dir, filepath.Base(pkg))
	args := []string{"build", "-ldflags", controlplane.VersionLDFlags, "-o", out}
	if raceEnabled {
		// `go test -race` checks the lab's own goroutines too: a lab runs
		// as its own process, so its binary needs the detector built in.
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build %s: %v\n%s", pkg, err, msg)
	}
	built[pkg] = out
	return out
}

func removeBuiltLabs() {
	buildMu.Lock()
	defer buildMu.Unlock()
	for _, p := range built {
		os.RemoveAll(filepath.Dir(p))
	}
}

// Program is a running lab.
type Program struct {
	Cmd    *exec.Cmd
	out    *SyncBuffer
	exited chan struct{}
}

// StartProgram starts bin with args and extra environment; it is stopped
// (SIGTERM, then SIGKILL) when the test ends.
func StartProgram(tb testing.TB, bin string, env []string, args ...string) *Program {
	tb.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	p := &Program{Cmd: cmd, out: &SyncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { cmd.Wait(); close(p.exited) }()
	tb.Cleanup(func() {
		p.Signal(syscall.SIGTERM)
		if !p.WaitExit(60 * time.Second) {
			cmd.Process.Kill()
			<-p.exited
		}
		checkNoRace(tb, bin, p.Output())
		if tb.Failed() {
			tb.Logf("output of %s:\n%s", filepath.Base(bin), p.Output())
		}
	})
	return p
}

// raceReport is what a program built with -race prints when it finds one.
const raceReport = "WARNING: DATA RACE"

// checkNoRace fails the test when the program reported a data race.
func checkNoRace(tb testing.TB, bin, output string) {
	tb.Helper()
	if i := strings.Index(output, raceReport); i >= 0 {
		tb.Errorf("%s reported a data race:\n%s", filepath.Base(bin), output[i:])
	}
}

// Output is everything the program printed so far.
func (p *Program) Output() string { return p.out.String() }

// Signal sends sig to the program.
func (p *Program) Signal(sig os.Signal) { _ = p.Cmd.Process.Signal(sig) }

// WaitExit waits up to d for the program to exit.
func (p *Program) WaitExit(d time.Duration) bool {
	select {
	case <-p.exited:
		return true
	case <-time.After(d):
		return false
	}
}

// ExitCode is valid after the program exited.
func (p *Program) ExitCode() int { return p.Cmd.ProcessState.ExitCode() }

// WaitFor waits until the output contains text; it fails the test if the
// program exits first or nothing comes within timeout.
func (p *Program) WaitFor(tb testing.TB, text string, timeout time.Duration) {
	tb.Helper()
	deadline := time.After(timeout)
	for !strings.Contains(p.Output(), text) {
		select {
		case <-p.exited:
			if strings.Contains(p.Output(), text) {
				return
			}
			tb.Fatalf("program exited (code %d) before printing %q:\n%s", p.ExitCode(), text, p.Output())
		case <-deadline:
			tb.Fatalf("program did not print %q within %s:\n%s", text, timeout, p.Output())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// RunProgram runs bin to completion and returns its output and exit code.
func RunProgram(tb testing.TB, bin string, env []string, args ...string) (string, int) {
	tb.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		tb.Fatalf("run %s: %v", bin, err)
	}
	checkNoRace(tb, bin, string(out))
	return string(out), cmd.ProcessState.ExitCode()
}

// SyncBuffer is a bytes.Buffer safe for a process writing while a test reads.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
