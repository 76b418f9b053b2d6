package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2/types"
)

// spec is an It of a ginkgo report, as the e2e framework names them:
// "[sig-xxx] <Describe> <It>".
func spec(container, leaf string, state types.SpecState, msg string, d time.Duration) types.SpecReport {
	return types.SpecReport{
		ContainerHierarchyTexts: []string{container}, LeafNodeText: leaf, LeafNodeType: types.NodeTypeIt,
		State: state, Failure: types.Failure{Message: msg}, RunTime: d,
	}
}

// writeReport writes what ginkgo's --json-report writes: a list of reports.
func writeReport(t *testing.T, name string, runTime time.Duration, specs ...types.SpecReport) string {
	t.Helper()
	b, err := json.Marshal([]types.Report{{SuiteDescription: "Kubernetes e2e suite", RunTime: runTime, SpecReports: specs}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// certifiedRun is a small certified run: a parallel part (two passed, two
// failed, one filtered out by --skip) and a serial part (one failed).
func certifiedRun(t *testing.T) Summary {
	t.Helper()
	par, err := Read(writeReport(t, "parallel.json", 50*time.Minute,
		spec("[sig-node] Pods", "should get a host IP [NodeConformance] [Conformance]", types.SpecStatePassed, "", time.Second),
		spec("[sig-apps] Deployment", "deployment should support rollover [Conformance]", types.SpecStatePassed, "", time.Second),
		spec("[sig-storage] ConfigMap", "should be consumable from pods in volume [NodeConformance] [Conformance]", types.SpecStateFailed,
			"expected pod \"pod-configmaps-1\" success: Told to stop trying after 95.818s.\nmore", time.Minute),
		spec("[sig-node] Pods", "should allow activeDeadlineSeconds to be updated [NodeConformance] [Conformance]", types.SpecStateFailed,
			"Timed out after 300.000s.", 5*time.Minute),
		// matched no --focus: ginkgo reports it skipped, without a message
		spec("[sig-node] Pods", "should be slow [Serial] [Conformance]", types.SpecStateSkipped, "", 0),
	))
	if err != nil {
		t.Fatal(err)
	}
	ser, err := Read(writeReport(t, "serial.json", 12*time.Minute,
		spec("[sig-scheduling] SchedulerPredicates [Serial]", "validates resource limits of pods that are allowed to run [Conformance]", types.SpecStatePanicked,
			"Test Panicked\nruntime error", time.Minute),
	))
	if err != nil {
		t.Fatal(err)
	}
	var s Summary
	s.Add("parallel", 12, par)
	s.Add("serial", 1, ser)
	return s
}

// TestAddMergesTheParts: the certified suite's two ginkgo runs are one
// result, each failure saying which run it was in.
func TestAddMergesTheParts(t *testing.T) {
	s := certifiedRun(t)
	if s.Passed != 2 || s.Failed != 3 || s.Skipped != 0 || s.Total() != 5 {
		t.Errorf("counts: got %d passed, %d failed, %d skipped of %d; want 2, 3, 0 of 5", s.Passed, s.Failed, s.Skipped, s.Total())
	}
	if s.RunTime != 62*time.Minute {
		t.Errorf("run time: got %s, want 1h2m0s (the parts, one after the other)", s.RunTime)
	}
	if len(s.Parts) != 2 || s.Parts[0].Name != "parallel" || s.Parts[0].Failed != 2 || s.Parts[1].Name != "serial" || s.Parts[1].Procs != 1 {
		t.Errorf("parts: got %+v", s.Parts)
	}
	// failures first, by name, across the parts
	var order []string
	for _, sp := range s.Specs {
		order = append(order, sp.Part+" "+sp.State+" "+sp.SIG())
	}
	want := "parallel failed sig-node, serial panicked sig-scheduling, parallel failed sig-storage, parallel passed sig-apps, parallel passed sig-node"
	if got := strings.Join(order, ", "); got != want {
		t.Errorf("specs (part state SIG): got %s\nwant %s", got, want)
	}
}

func TestSIGAndCauseKeyword(t *testing.T) {
	for _, c := range []struct {
		name, state, cause, sig, keyword string
	}{
		{"[sig-node] Pods should get a host IP", "passed", "", "sig-node", ""},
		{"[sig-api-machinery] Watchers should observe", "failed", "Timed out after 30.001s.", "sig-api-machinery", CauseTimedOut},
		{"[sig-node] [NodeConformance] [FeatureGate:SidecarContainers] Probing", "failed", "context deadline exceeded", "sig-node", CauseTimedOut},
		{"[sig-storage] Secrets in volume", "failed", `expected pod "p" success: Told to stop trying after 12.1s.`, "sig-storage", CausePodFailed},
		{"[sig-storage] Secrets in volume", "failed", `expected pod "p" success: Timed out after 300.001s.`, "sig-storage", CauseTimedOut},
		{"[sig-node] ConfigMap via the environment", "failed", `expected "data-1=value-1" in container output: Expected`, "sig-node", CauseOutput},
		{"[sig-node] KubeletManagedEtcHosts", "failed", "failed to execute command in pod test-pod, container busybox-1: command terminated with exit code 1", "sig-node", CauseExec},
		{"[sig-node] Pod InPlace Resize", "panicked", "Test Panicked", "sig-node", CausePanicked},
		{"[sig-node] Sysctls", "failed", "Expected", "sig-node", CauseAssertion},
		{"[sig-apps] Job", "timedout", "A spec timeout occurred", "sig-apps", CauseSpecTimout},
		{"[sig-network] DNS", "failed", "Error dialing UDP", "sig-network", CauseOther},
		{"Invariant Metrics should enable checking", "failed", "boom", NoSIG, CauseOther},
	} {
		sp := Spec{Name: c.name, State: c.state, Cause: c.cause}
		if got := sp.SIG(); got != c.sig {
			t.Errorf("%q: SIG %q, want %q", c.name, got, c.sig)
		}
		if got := sp.CauseKeyword(); got != c.keyword {
			t.Errorf("%q (%s: %s): cause keyword %q, want %q", c.name, c.state, c.cause, got, c.keyword)
		}
	}
}

// TestPrintMergedRun is summary.txt of a certified run.
func TestPrintMergedRun(t *testing.T) {
	var b strings.Builder
	certifiedRun(t).Print(&b)
	want := `2 passed, 3 failed, 0 skipped (1h2m0s)
parallel: 4 specs, 12 processes, 50m0s; serial: 1 specs, 1 process, 12m0s
by SIG (passed/specs): sig-node 1/2, sig-apps 1/1, sig-scheduling 0/1, sig-storage 0/1
failures by cause: panicked 1, pod failed 1, timed out 1
FAIL  [sig-node] Pods should allow activeDeadlineSeconds to be updated [NodeConformance] [Conformance]
      failed (parallel run): Timed out after 300.000s.
FAIL  [sig-scheduling] SchedulerPredicates [Serial] validates resource limits of pods that are allowed to run [Conformance]
      panicked (serial run): Test Panicked
FAIL  [sig-storage] ConfigMap should be consumable from pods in volume [NodeConformance] [Conformance]
      failed (parallel run): expected pod "pod-configmaps-1" success: Told to stop trying after 95.818s.
`
	if b.String() != want {
		t.Errorf("Print:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestPrintOneRun: the default suite's summary is what it was.
func TestPrintOneRun(t *testing.T) {
	s, err := Read(writeReport(t, "report.json", 13*time.Minute,
		spec("[sig-node] Pods", "should get a host IP [NodeConformance] [Conformance]", types.SpecStatePassed, "", time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	s.Print(&b)
	if want := "1 passed, 0 failed, 0 skipped (13m0s)\n"; b.String() != want {
		t.Errorf("Print: %q, want %q", b.String(), want)
	}
}

// TestMarkdownGroupsBySIGAndCause is the fragment for BASELINE.md.
func TestMarkdownGroupsBySIGAndCause(t *testing.T) {
	var b strings.Builder
	certifiedRun(t).Markdown(&b)
	want := "2 passed, 3 failed, 0 skipped of 5 (ginkgo 1h2m0s; parallel: 4 specs, 12 processes, 50m0s; serial: 1 specs, 1 process, 12m0s)\n" +
		"\n| SIG | specs | passed | failed | skipped |\n|---|--:|--:|--:|--:|\n" +
		"| sig-node | 2 | 1 | 1 | 0 |\n| sig-apps | 1 | 1 | 0 | 0 |\n| sig-scheduling | 1 | 0 | 1 | 0 |\n| sig-storage | 1 | 0 | 1 | 0 |\n" +
		"\nFailures by cause (a keyword of the message; check the cause line before acting on one): panicked 1, pod failed 1, timed out 1\n" +
		"\n### sig-node: timed out (1)\n\n" +
		"- `[sig-node] Pods should allow activeDeadlineSeconds to be updated [NodeConformance] [Conformance]` — failed (parallel run): Timed out after 300.000s.\n" +
		"\n### sig-scheduling: panicked (1)\n\n" +
		"- `[sig-scheduling] SchedulerPredicates [Serial] validates resource limits of pods that are allowed to run [Conformance]` — panicked (serial run): Test Panicked\n" +
		"\n### sig-storage: pod failed (1)\n\n" +
		"- `[sig-storage] ConfigMap should be consumable from pods in volume [NodeConformance] [Conformance]` — failed (parallel run): expected pod \"pod-configmaps-1\" success: Told to stop trying after 95.818s.\n"
	if b.String() != want {
		t.Errorf("Markdown:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestPrintSelection is what --dry-run prints.
func TestPrintSelection(t *testing.T) {
	var b strings.Builder
	certifiedRun(t).PrintSelection(&b)
	want := "5 specs selected\n  parallel run 4, serial run 1\n" +
		"  sig-node                  2\n  sig-apps                  1\n  sig-scheduling            1\n  sig-storage               1\n"
	if b.String() != want {
		t.Errorf("PrintSelection:\n%q\nwant:\n%q", b.String(), want)
	}
}
