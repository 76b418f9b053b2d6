package benchkit

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat:
// 100 on every Linux the labs run on.
const clockTicks = 100

// CPUTime is the user + system CPU a process has used so far.
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: count fields after ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	// f[0] is field 3 (state): utime is field 14, stime 15.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad utime/stime", pid)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// Memory reads VmRSS (now) and VmHWM (the peak so far) in bytes.
func Memory(pid int) (rss, peak int64, err error) {
	m, err := readMemory(pid)
	return m.rss, m.peak, err
}

// memory is what /proc/PID/status says of a process's resident memory,
// in bytes: VmRSS is RssAnon (heap, stacks: what the program allocated)
// plus RssFile (pages of files it mapped, its own binary's code and data
// first) plus RssShmem.
type memory struct{ rss, peak, anon, file int64 }

func readMemory(pid int) (m memory, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "VmRSS:":
			m.rss = kb << 10
		case "VmHWM:":
			m.peak = kb << 10
		case "RssAnon:":
			m.anon = kb << 10
		case "RssFile:":
			m.file = kb << 10
		}
	}
	return m, s.Err()
}

// Child is a tool under test, run as a process of its own so that its
// memory and CPU are its own, read from /proc.
type Child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  string

	mu       sync.Mutex
	peakRSS  int64
	peakAnon int64 // the highest RssAnon and RssFile sampled
	peakFile int64
	lastCPU  time.Duration
	sampling chan struct{}
}

// StartChild starts bin with args, its output in logPath and env added to
// this process's environment.
func StartChild(name, logPath string, env []string, bin string, args ...string) (*Child, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true, // Ctrl-C reaches us; we stop the child ourselves
		// If the benchmark dies (kill -9, a test timeout), the kernel kills
		// the child: no orphaned tool writing to the cluster.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &Child{name: name, cmd: cmd, done: make(chan struct{}), log: logPath, sampling: make(chan struct{})}
	go func() { c.err = cmd.Wait(); close(c.done) }()
	go c.sample()
	return c, nil
}

// Pid is the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Log is the file its output goes to.
func (c *Child) Log() string { return c.log }

// sample keeps the peak RSS and the CPU time, every 250 ms, until the
// process exits: once it has, /proc no longer has them.
func (c *Child) sample() {
	defer close(c.sampling)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		m, err1 := readMemory(c.Pid())
		cpu, err2 := CPUTime(c.Pid())
		if err1 == nil && err2 == nil {
			c.mu.Lock()
			c.peakRSS, c.lastCPU = max(c.peakRSS, m.peak), cpu
			c.peakAnon, c.peakFile = max(c.peakAnon, m.anon), max(c.peakFile, m.file)
			c.mu.Unlock()
		}
		select {
		case <-c.done:
			return
		case <-t.C:
		}
	}
}

// Usage is the peak RSS and CPU time seen so far.
func (c *Child) Usage() (peakRSS int64, cpu time.Duration) {
	if _, peak, err := Memory(c.Pid()); err == nil {
		c.mu.Lock()
		c.peakRSS = max(c.peakRSS, peak)
		c.mu.Unlock()
	}
	if cpu, err := CPUTime(c.Pid()); err == nil {
		c.mu.Lock()
		c.lastCPU = cpu
		c.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peakRSS, c.lastCPU
}

// PeakParts is the highest RssAnon (what the program allocated: heap,
// stacks) and RssFile (the pages of its own binary and other files it
// mapped) sampled so far, every 250 ms: where its peak RSS comes from.
// Each is its own highest, so the two need not add up to the peak.
func (c *Child) PeakParts() (anon, file int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peakAnon, c.peakFile
}

// Exited reports an early exit, with the end of its log.
func (c *Child) Exited() error {
	select {
	case <-c.done:
		return fmt.Errorf("%s exited early (%v); its log is %s:\n%s", c.name, c.err, c.log, Tail(c.log, 15))
	default:
		return nil
	}
}

// Stop sends SIGTERM, waits up to grace, then SIGKILLs.
func (c *Child) Stop(grace time.Duration) {
	select {
	case <-c.done:
		return
	default:
	}
	_ = syscall.Kill(-c.Pid(), syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(grace):
		_ = syscall.Kill(-c.Pid(), syscall.SIGKILL)
		<-c.done
	}
	<-c.sampling
}

// Tail is the last n lines of a file ("" if it cannot be read).
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
