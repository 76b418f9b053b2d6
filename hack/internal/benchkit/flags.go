package benchkit

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"strings"
	"time"
)

// The flags every benchmark takes for how it repeats itself and how quiet
// a machine it wants. Their names, defaults and checks are one here; most
// of their help each benchmark words in its own terms (fleetbench's
// "tool" is kubeletbench's "run"), so it passes its wording in.

// RoundFlags is --rounds: every tool runs that many times, each round in
// another order (RoundOrder), and the table shows the medians.
type RoundFlags struct {
	Rounds int
}

// Register adds --rounds (default 3) to fs, with the benchmark's help.
func (r *RoundFlags) Register(fs *flag.FlagSet, help string) {
	fs.IntVar(&r.Rounds, "rounds", 3, help)
}

// Check refuses a count of rounds outside 1 to 20.
func (r RoundFlags) Check() error {
	if r.Rounds < 1 || r.Rounds > 20 {
		return fmt.Errorf("--rounds %d: must be 1 to 20", r.Rounds)
	}
	return nil
}

// LoadFlags are --max-load, --allow-busy and --quiet-wait: a machine whose
// 1-minute load is above MaxLoad per core is busy — refused at the start
// (unless AllowBusy), waited for (up to QuietWait) before each tool, and
// flagged in the table.
type LoadFlags struct {
	MaxLoad   float64
	AllowBusy bool
	QuietWait time.Duration
}

// LoadHelp is a benchmark's wording of --max-load's and --quiet-wait's
// help (--allow-busy's is the same for every benchmark).
type LoadHelp struct {
	MaxLoad, QuietWait string
}

// Register adds --max-load (default 1), --allow-busy and --quiet-wait
// (default 3m) to fs.
func (l *LoadFlags) Register(fs *flag.FlagSet, help LoadHelp) {
	fs.Float64Var(&l.MaxLoad, "max-load", 1, help.MaxLoad)
	fs.BoolVar(&l.AllowBusy, "allow-busy", false, "run on a busy machine anyway; the table then says so at its top")
	fs.DurationVar(&l.QuietWait, "quiet-wait", 3*time.Minute, help.QuietWait)
}

// Check refuses a --max-load that is not positive.
func (l LoadFlags) Check() error {
	if l.MaxLoad <= 0 {
		return fmt.Errorf("--max-load %g: must be positive", l.MaxLoad)
	}
	return nil
}

// Threshold is the 1-minute load above which the machine is busy.
func (l LoadFlags) Threshold() float64 { return BusyThreshold(l.MaxLoad) }

// CheckQuiet refuses a busy machine before anything starts, unless
// --allow-busy; starvesFirst, if not "", names what a busy machine starves
// first. A load that cannot be read refuses nothing (the table says "?").
func (l LoadFlags) CheckQuiet(load func() (float64, error), starvesFirst string) error {
	v, err := load()
	if err != nil || l.AllowBusy {
		return nil
	}
	if v > l.Threshold() {
		if starvesFirst != "" {
			starvesFirst = " (" + starvesFirst + " starve first)"
		}
		return fmt.Errorf("the machine is busy: load %.2f on %d cores, above --max-load %g per core; a comparison now measures the other work%s. Wait until it is quiet, or pass --allow-busy (the table then says the run was busy)",
			v, runtime.NumCPU(), l.MaxLoad, starvesFirst)
	}
	return nil
}

// WaitQuiet is WaitQuiet with the flags' threshold, --allow-busy and
// --quiet-wait: the load a tool starts at, and whether it was busy.
func (l LoadFlags) WaitQuiet(ctx context.Context, load func() (float64, error), logf func(string, ...any)) (float64, bool) {
	return WaitQuiet(ctx, load, l.Threshold(), l.AllowBusy, l.QuietWait, logf)
}

// BusyWarning is the line a table prints at its top and bottom when runs
// started on a busy machine (busy says which, and at what load); "" when
// none did.
func (l LoadFlags) BusyWarning(busy []string) string {
	if len(busy) == 0 {
		return ""
	}
	return fmt.Sprintf("WARNING: A BUSY MACHINE (1-minute load above %g per core, %.2f here): %s. Other work skews the comparison; run it again on a quiet machine.\n",
		l.MaxLoad, l.Threshold(), strings.Join(busy, "; "))
}
