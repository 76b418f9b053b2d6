package harness

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// matches says whether ginkgo would run the spec: it matches any focus
// and no skip (ginkgo/v2 internal/focus.go), against
// "<suite description> <spec text>".
func matches(p Phase, name string) bool {
	text := "Kubernetes e2e suite " + name
	any := false
	for _, f := range p.Focus {
		if regexp.MustCompile(f).MatchString(text) {
			any = true
		}
	}
	for _, s := range p.Skip {
		if regexp.MustCompile(s).MatchString(text) {
			return false
		}
	}
	return any
}

// Names of v1.36.3 specs (from the e2e binary's --dry-run).
const (
	hostIP   = "[sig-node] Pods should get a host IP [NodeConformance] [Conformance]"
	taint    = "[sig-node] NoExecuteTaintManager Single Pod [Serial] removing taint cancels eviction [Disruptive] [Conformance]"
	predSer  = "[sig-scheduling] SchedulerPredicates [Serial] validates resource limits of pods that are allowed to run [Conformance]"
	pullSer  = "[sig-node] Container Runtime blackbox test when running a container with a new image [Serial] should be able to pull image [NodeConformance]"
	slowConf = "[sig-node] Variable Expansion should verify that a failing subpath expansion can be modified during the lifecycle of a container [Slow] [Conformance]"
	notConf  = "[sig-node] Pods Extended Pod Container lifecycle should not create extra sandbox if all containers are done"
)

// TestPhasesCertified: the parallel run skips only [Serial] and
// [Disruptive]; the serial run is those, with one process; every spec of
// the suite is in exactly one of them.
func TestPhasesCertified(t *testing.T) {
	focus, skip, err := Selection(SuiteCertified)
	if err != nil {
		t.Fatal(err)
	}
	phases, err := Phases(Options{Suite: SuiteCertified, Focus: focus, Skip: skip, Procs: 12, RunDir: "/run"})
	if err != nil {
		t.Fatal(err)
	}
	if len(phases) != 2 {
		t.Fatalf("want 2 ginkgo runs, got %d: %+v", len(phases), phases)
	}
	par, ser := phases[0], phases[1]
	if par.Name != PhaseParallel || par.Procs != 12 || par.Dir != filepath.Join("/run", "parallel") {
		t.Errorf("parallel run: got %+v", par)
	}
	if got := strings.Join(par.Skip, " "); got != `\[Serial\]|\[Disruptive\]` {
		t.Errorf("parallel run skips %q, want only [Serial] and [Disruptive]", got)
	}
	if ser.Name != PhaseSerial || ser.Procs != 1 || ser.Dir != filepath.Join("/run", "serial") || len(ser.Skip) != 0 {
		t.Errorf("serial run: got %+v, want one process, no skip", ser)
	}
	for _, c := range []struct {
		name          string
		parallel, ser bool
	}{
		{hostIP, true, false},
		{slowConf, true, false}, // [Slow] runs: Sonobuoy's certified mode skips nothing
		{taint, false, true},    // [Disruptive] runs too, as in Sonobuoy's certified mode
		{predSer, false, true},
		{pullSer, false, false}, // [NodeConformance], not [Conformance]
		{notConf, false, false},
	} {
		if got := matches(par, c.name); got != c.parallel {
			t.Errorf("parallel run selects %q: %v, want %v", c.name, got, c.parallel)
		}
		if got := matches(ser, c.name); got != c.ser {
			t.Errorf("serial run selects %q: %v, want %v", c.name, got, c.ser)
		}
	}
}

// TestPhasesNodeAndUserFocus: --skip applies to both runs; a --focus
// narrows both.
func TestPhasesNodeAndUserFocus(t *testing.T) {
	phases, err := Phases(Options{Suite: SuiteNode, Focus: []string{`Container Runtime`}, Skip: []string{`private registry`}, Procs: 4, RunDir: "/run"})
	if err != nil {
		t.Fatal(err)
	}
	par, ser := phases[0], phases[1]
	if !matches(ser, pullSer) || matches(par, pullSer) {
		t.Errorf("%q: want it in the serial run only", pullSer)
	}
	private := strings.Replace(pullSer, "should be able to pull image", "should be able to pull from private registry with secret", 1)
	if matches(ser, private) {
		t.Errorf("%q: --skip private registry, yet the serial run selects it", private)
	}
	if matches(par, hostIP) || matches(ser, hostIP) {
		t.Errorf("%q: not Container Runtime, yet selected", hostIP)
	}
}

// TestPhasesDefault: the default suite is one run, as before.
func TestPhasesDefault(t *testing.T) {
	for _, suite := range []string{"", SuiteDefault} {
		focus, skip, err := Selection(suite)
		if err != nil {
			t.Fatal(err)
		}
		phases, err := Phases(Options{Suite: suite, Focus: focus, Skip: skip, Procs: 12, RunDir: "/run"})
		if err != nil {
			t.Fatal(err)
		}
		if len(phases) != 1 || phases[0].Name != "" || phases[0].Dir != "/run" || phases[0].Procs != 12 {
			t.Fatalf("suite %q: want one run in /run, got %+v", suite, phases)
		}
		if !matches(phases[0], hostIP) || matches(phases[0], predSer) || matches(phases[0], slowConf) {
			t.Errorf("suite %q: the default selection changed: %+v", suite, phases[0])
		}
	}
}

func TestSelectionUnknownSuite(t *testing.T) {
	_, _, err := Selection("certifed")
	if err == nil || err.Error() != `unknown suite "certifed": want one of default, certified, node` {
		t.Errorf("got %v, want a one-line error naming the suites", err)
	}
	if _, err := Phases(Options{Suite: "certifed"}); err == nil {
		t.Error("Phases: an unknown suite is no error")
	}
}
