package controlplane

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// process is one child: etcd, kube-apiserver or kube-controller-manager.
type process struct {
	name    string
	bin     string
	args    []string
	logPath string

	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // exit status, valid after done

	retired bool // we asked it to exit (guarded by ControlPlane.mu)
}

func startProcess(name, bin string, args []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s: log file: %w", name, err)
	}
	defer logFile.Close() // the child keeps its own descriptor
	fmt.Fprintf(logFile, "\n==== %s starting at %s: %s %s\n", name, time.Now().Format(time.RFC3339), bin, strings.Join(args, " "))

	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true, // its own group: Ctrl-C reaches us, we stop the children in order
		// If we die without cleaning up (kill -9, a test timeout), the kernel
		// kills the child: no orphaned apiserver holding a port.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: start %s: %w", name, bin, err)
	}
	p := &process{name: name, bin: bin, args: args, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitError explains an unexpected exit, naming the log and quoting its end.
func (p *process) exitError() error {
	tail := readTail(p.logPath, 15)
	hint := ""
	if strings.Contains(tail, "address already in use") {
		hint = "\nhint: a port it needs is in use; is another control plane running? (ss -ltnp)"
	}
	return fmt.Errorf("%s exited early (%v); its log is %s; last lines:\n%s%s", p.name, p.err, p.logPath, tail, hint)
}

// stop sends SIGTERM to the process group, waits up to grace, then SIGKILLs.
func (p *process) stop(grace time.Duration) error {
	if p == nil || p.exited() {
		return nil
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, p.pid())
	}
}

func readTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "(no log)"
		}
		return err.Error()
	}
	return tailLines(string(data), n)
}
