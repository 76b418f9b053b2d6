package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kubelet-labs/hack/conformance/internal/harness"
	"kubelet-labs/hack/conformance/internal/report"
)

// The selections of upstream's e2e suite at v1.36.3, by SIG (DESIGN.md
// "Upstream's e2e suite at v1.36.3": 446 [Conformance] specs, 29 of them
// [Serial]/[Disruptive], and 250 [NodeConformance]).
var suiteCounts = map[string]struct {
	total, serial int
	bySIG         string
}{
	// the issue-21 selection, as BASELINE.md's runs
	harness.SuiteDefault: {201, 0, "sig-node 166, sig-storage 31, sig-network 4"},
	harness.SuiteCertified: {446, 29, "sig-node 106, sig-api-machinery 99, sig-storage 91, sig-apps 60, sig-network 47, " +
		"sig-cli 17, sig-scheduling 11, sig-auth 10, sig-instrumentation 4, sig-architecture 1"},
	harness.SuiteNode: {250, 4, "sig-node 146, sig-storage 100, sig-network 4"},
}

// TestSuiteDryRun lists each suite's specs with ginkgo's --dry-run (no
// cluster) and checks their number, per SIG and per ginkgo run: the e2e
// binary holds the whole of upstream's suite, and the suites select what
// they say. It needs both e2e binaries, the whole suite's a 20-minute build
// on 2 cores with a cold Go cache: it builds it (through the harness's
// cache) when CONFORMANCE_DRYRUN=1, and otherwise runs only when the
// harness's cache holds current ones (left by `make conformance` of each
// suite and the slice test), in seconds; else it is skipped.
func TestSuiteDryRun(t *testing.T) {
	l, err := harness.NewLayout()
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("CONFORMANCE_DRYRUN") != "1" {
		for _, name := range []string{"e2e.test", harness.E2ECertified, "ginkgo"} {
			bin, err := l.Cached(name)
			if err != nil {
				t.Fatal(err)
			}
			if bin == "" {
				t.Skipf("no current %s in %s; CONFORMANCE_DRYRUN=1 builds it (about 20 minutes with a cold Go cache)", name, l.BinDir)
			}
		}
	}
	for _, suite := range harness.Suites {
		t.Run(suite, func(t *testing.T) {
			want := suiteCounts[suite]
			focus, skip, err := harness.Selection(suite)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			defer cancel()
			runDir := filepath.Join(t.TempDir(), "run")
			s, err := l.Run(ctx, harness.Options{Suite: suite, Focus: focus, Skip: skip, Procs: 12, RunDir: runDir,
				Timeout: 10 * time.Minute, DryRun: true, Progress: testWriter{t}})
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			s.PrintSelection(&b)
			t.Logf("suite %s: %s", suite, b.String())
			if s.Total() != want.total {
				t.Errorf("suite %s: %d specs selected, want %d", suite, s.Total(), want.total)
			}
			var sigs []string
			for _, c := range s.BySIG() {
				sigs = append(sigs, fmt.Sprintf("%s %d", c.Key, c.Total()))
			}
			if got := strings.Join(sigs, ", "); got != want.bySIG {
				t.Errorf("suite %s by SIG:\n got %s\nwant %s", suite, got, want.bySIG)
			}
			if serial := serialCount(s); serial != want.serial {
				t.Errorf("suite %s: %d specs in the serial run, want %d", suite, serial, want.serial)
			}
		})
	}
}

// serialCount is the number of specs of the serial part (0 for a suite of
// one run).
func serialCount(s report.Summary) int {
	for _, p := range s.Parts {
		if p.Name == harness.PhaseSerial {
			return p.Passed + p.Failed + p.Skipped
		}
	}
	return 0
}
