package benchkit

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ProcLoadAvg1 is the 1-minute load average (/proc/loadavg).
func ProcLoadAvg1() (float64, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return 0, fmt.Errorf("/proc/loadavg: %q", b)
	}
	return strconv.ParseFloat(f[0], 64)
}

// MachineCPU is the CPU time every process on the machine has used since
// boot: user, nice, system, irq, softirq and steal of /proc/stat's "cpu"
// line (idle and iowait are not work).
func MachineCPU() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system (idle iowait) irq softirq steal
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %q: %w", line, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// SelfCPU is the CPU time of this process (the benchmark's own driver).
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BusyThreshold is the 1-minute load above which the machine is busy:
// maxLoad per core.
func BusyThreshold(maxLoad float64) float64 { return maxLoad * float64(runtime.NumCPU()) }

// WaitQuiet waits, up to wait, for the 1-minute load (read by load) to
// fall under threshold — the tool before leaves it high for a minute or
// two — and returns the load it starts at; busy is true if it never fell.
// With allowBusy it does not wait. A load that cannot be read is -1.
func WaitQuiet(ctx context.Context, load func() (float64, error), threshold float64, allowBusy bool, wait time.Duration, logf func(string, ...any)) (float64, bool) {
	l, err := load()
	if err != nil {
		return -1, false
	}
	if allowBusy || l <= threshold {
		return l, l > threshold
	}
	logf("waiting up to %s for the load (%.2f) to fall under %.2f before the next tool", wait, l, threshold)
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return l, true
		case <-time.After(5 * time.Second):
		}
		if l, err = load(); err != nil || l <= threshold {
			return l, false
		}
	}
	logf("the load is still %.2f: this tool's run is marked busy in the table", l)
	return l, true
}

// LoadWatch samples the 1-minute load during a tool's run and counts the
// CPU time of the whole machine, so that what other processes used in the
// run can be told apart from the tool's and the control plane's.
type LoadWatch struct {
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
	mu       sync.Mutex
	sum, max float64
	n        int
	cpu0     time.Duration
	self0    time.Duration
}

// WatchLoad starts sampling load every 5 s.
func WatchLoad(load func() (float64, error)) *LoadWatch {
	w := &LoadWatch{stop: make(chan struct{}), done: make(chan struct{}), self0: SelfCPU()}
	w.cpu0, _ = MachineCPU()
	go func() {
		defer close(w.done)
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			if l, err := load(); err == nil {
				w.mu.Lock()
				w.sum, w.max, w.n = w.sum+l, max(w.max, l), w.n+1
				w.mu.Unlock()
			}
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

// End stops the sampling (once; a failed run's deferred call is a no-op
// then): the mean and highest load seen, the machine's CPU time over the
// run, and the benchmark's own.
func (w *LoadWatch) End() (mean, peak float64, machine, self time.Duration) {
	w.once.Do(func() { close(w.stop) })
	<-w.done
	if cpu1, err := MachineCPU(); err == nil {
		machine = cpu1 - w.cpu0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n > 0 {
		mean = w.sum / float64(w.n)
	}
	return mean, w.max, machine, SelfCPU() - w.self0
}

// Machine is the CPU count and model, for a table's header.
func Machine() string {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				if i := strings.IndexByte(l, ':'); i > 0 {
					model = strings.TrimSpace(l[i+1:])
				}
				break
			}
		}
	}
	return fmt.Sprintf("%d CPUs (%s)", runtime.NumCPU(), model)
}
