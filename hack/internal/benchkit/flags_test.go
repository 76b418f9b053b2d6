package benchkit

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRoundFlagsDefaultAndRange: --rounds is 3 unless given, and a count
// outside 1 to 20 is refused in the words both benchmarks print.
func TestRoundFlagsDefaultAndRange(t *testing.T) {
	var r RoundFlags
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	r.Register(fs, "rounds of every tool")
	if err := fs.Parse(nil); err != nil || r.Rounds != 3 {
		t.Fatalf("no flags: rounds %d (%v), want 3", r.Rounds, err)
	}
	for n, want := range map[int]string{0: "--rounds 0: must be 1 to 20", 21: "--rounds 21: must be 1 to 20", 1: "", 20: ""} {
		err := RoundFlags{Rounds: n}.Check()
		if got := errText(err); got != want {
			t.Errorf("--rounds %d: %q, want %q", n, got, want)
		}
	}
}

// TestLoadFlagsKeepEachToolsHelp: the defaults are one (--max-load 1,
// --quiet-wait 3m, --allow-busy off), the help of --max-load and
// --quiet-wait is the benchmark's own, and a --max-load that is not
// positive is refused.
func TestLoadFlagsKeepEachToolsHelp(t *testing.T) {
	var l LoadFlags
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	l.Register(fs, LoadHelp{MaxLoad: "max-load help of this tool", QuietWait: "quiet-wait help of this tool"})
	if err := fs.Parse(nil); err != nil || l != (LoadFlags{MaxLoad: 1, QuietWait: 3 * time.Minute}) {
		t.Fatalf("no flags: %+v (%v), want --max-load 1, --quiet-wait 3m, not --allow-busy", l, err)
	}
	var help strings.Builder
	fs.SetOutput(&help)
	fs.PrintDefaults()
	for _, want := range []string{"max-load help of this tool (default 1)", "quiet-wait help of this tool (default 3m0s)", "run on a busy machine anyway; the table then says so at its top"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("the help lacks %q:\n%s", want, help.String())
		}
	}
	if got, want := errText(LoadFlags{MaxLoad: 0}.Check()), "--max-load 0: must be positive"; got != want {
		t.Errorf("--max-load 0: %q, want %q", got, want)
	}
}

// TestLoadFlagsRefuseABusyMachine: above the threshold nothing starts,
// unless --allow-busy, and the error says what to do (and, where the
// benchmark knows, what starves first); a load that cannot be read
// refuses nothing.
func TestLoadFlagsRefuseABusyMachine(t *testing.T) {
	busy := func() (float64, error) { return 1e6, nil }
	l := LoadFlags{MaxLoad: 1}
	err := l.CheckQuiet(busy, "KWOK's pod workers")
	if got := errText(err); !strings.HasPrefix(got, "the machine is busy: load 1000000.00 on ") ||
		!strings.Contains(got, "a comparison now measures the other work (KWOK's pod workers starve first). Wait until it is quiet, or pass --allow-busy") {
		t.Errorf("busy: %q", got)
	}
	if got := errText(l.CheckQuiet(busy, "")); !strings.Contains(got, "measures the other work. Wait until it is quiet") {
		t.Errorf("busy, nothing named to starve: %q", got)
	}
	for name, c := range map[string]struct {
		l    LoadFlags
		load func() (float64, error)
	}{
		"--allow-busy": {LoadFlags{MaxLoad: 1, AllowBusy: true}, busy},
		"quiet":        {l, func() (float64, error) { return 0, nil }},
		"no loadavg":   {l, func() (float64, error) { return 0, errors.New("no /proc") }},
	} {
		if err := c.l.CheckQuiet(c.load, "x"); err != nil {
			t.Errorf("%s: %v, want no error", name, err)
		}
	}
	if load, busy := (LoadFlags{MaxLoad: 1, AllowBusy: true}).WaitQuiet(t.Context(), busy, t.Logf); load != 1e6 || !busy {
		t.Errorf("WaitQuiet with --allow-busy: %v %v, want the load, busy, at once", load, busy)
	}
}

// TestTableBusyWarning: no warning for quiet runs; otherwise one line
// naming the threshold and every busy run.
func TestTableBusyWarning(t *testing.T) {
	l := LoadFlags{MaxLoad: 0.5}
	if got := l.BusyWarning(nil); got != "" {
		t.Errorf("no busy run: %q", got)
	}
	want := "WARNING: A BUSY MACHINE (1-minute load above 0.5 per core, " + fmt.Sprintf("%.2f", l.Threshold()) + " here): a; b. Other work skews the comparison; run it again on a quiet machine.\n"
	if got := l.BusyWarning([]string{"a", "b"}); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
