package main

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

// A comparison of two tools on one machine measures the machine as much as
// the tools: under other work KWOK's four pod workers starve and the order
// of the two flips (issue 23). So the benchmark measures how busy the
// machine was before and during each tool, waits for it to be quiet before
// each one, and refuses to start — unless told otherwise, and then says so
// in the table — on a machine that is busy already.

// loadAvg1 reads the 1-minute load; a test replaces it.
var loadAvg1 = procLoadAvg1

// procLoadAvg1 is the 1-minute load average (/proc/loadavg).
func procLoadAvg1() (float64, error) {
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

// machineCPU is the CPU time every process on the machine has used since
// boot: user, nice, system, irq, softirq and steal of /proc/stat's "cpu"
// line (idle and iowait are not work).
func machineCPU() (time.Duration, error) {
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

// selfCPU is the CPU time of this process (the benchmark's own driver).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// busyThreshold is the 1-minute load above which the machine is busy:
// maxLoad per core.
func (o options) busyThreshold() float64 { return o.maxLoad * float64(runtime.NumCPU()) }

// checkQuiet refuses a busy machine before anything starts, unless
// --allow-busy.
func checkQuiet(o options) error {
	load, err := loadAvg1()
	if err != nil || o.allowBusy {
		return nil // no /proc/loadavg: nothing to refuse on; the table says "?"
	}
	if load > o.busyThreshold() {
		return fmt.Errorf("the machine is busy: load %.2f on %d cores, above --max-load %g per core; a comparison now measures the other work (KWOK's pod workers starve first). Wait until it is quiet, or pass --allow-busy (the table then says the run was busy)",
			load, runtime.NumCPU(), o.maxLoad)
	}
	return nil
}

// waitQuiet waits, up to o.quietWait, for the 1-minute load to fall under
// the threshold — the tool before leaves it high for a minute or two — and
// returns the load it starts at; busy is true if it never fell.
func waitQuiet(ctx context.Context, o options, logf func(string, ...any)) (load float64, busy bool) {
	load, err := loadAvg1()
	if err != nil {
		return -1, false
	}
	if o.allowBusy || load <= o.busyThreshold() {
		return load, load > o.busyThreshold()
	}
	logf("waiting up to %s for the load (%.2f) to fall under %.2f before the next tool", o.quietWait, load, o.busyThreshold())
	deadline := time.Now().Add(o.quietWait)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return load, true
		case <-time.After(5 * time.Second):
		}
		if load, err = loadAvg1(); err != nil || load <= o.busyThreshold() {
			return load, false
		}
	}
	logf("the load is still %.2f: this tool's run is marked busy in the table", load)
	return load, true
}

// loadWatch samples the 1-minute load during a tool's run and counts the
// CPU time of the whole machine, so that what other processes used in the
// run can be told apart from the tool's and the control plane's.
type loadWatch struct {
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
	mu       sync.Mutex
	sum, max float64
	n        int
	cpu0     time.Duration
	self0    time.Duration
}

func watchLoad() *loadWatch {
	w := &loadWatch{stop: make(chan struct{}), done: make(chan struct{}), self0: selfCPU()}
	w.cpu0, _ = machineCPU()
	go func() {
		defer close(w.done)
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			if l, err := loadAvg1(); err == nil {
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

// end stops the sampling (once; a failed run's deferred call is a no-op
// then): the mean and highest load seen, the machine's CPU time over the
// run, and the benchmark's own.
func (w *loadWatch) end() (mean, peak float64, machine, self time.Duration) {
	w.once.Do(func() { close(w.stop) })
	<-w.done
	if cpu1, err := machineCPU(); err == nil {
		machine = cpu1 - w.cpu0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n > 0 {
		mean = w.sum / float64(w.n)
	}
	return mean, w.max, machine, selfCPU() - w.self0
}
