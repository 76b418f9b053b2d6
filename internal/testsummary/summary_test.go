package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sample is a module whose tests pass, skip (with and without a reason,
// also in a subtest) and fail; go test -json runs it for real, so the test
// follows test2json's actual output.
const sample = `package sample

import "testing"

func TestPasses(t *testing.T) { t.Log("noise a passing test makes") }

func TestSkipsWithAReason(t *testing.T) {
	t.Log("looking for containerd")
	t.Skip("containerd is not running: start it with sudo scripts/containerd-up.sh")
}

func TestSkipsSilently(t *testing.T) { t.SkipNow() }

func TestParent(t *testing.T) {
	t.Run("child", func(t *testing.T) { t.Skipf("needs %s", "root") })
}

func TestFails(t *testing.T) { t.Error("the bytes differ") }
`

func sampleModule(t *testing.T) string {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"go.mod":         "module sample\n\ngo 1.26\n",
		"sample_test.go": sample,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestSummaryNamesSkipsAndFailures(t *testing.T) {
	var out strings.Builder
	s := newSummary(&out)
	t.Setenv("GOFLAGS", "")
	code, err := runGroup(group{dir: sampleModule(t), args: []string{"-count=1", "./..."}}, s)
	if err != nil {
		t.Fatal(err)
	}
	s.print(time.Second)
	got := out.String()
	t.Logf("output:\n%s", got)

	if code == 0 {
		t.Error("go test's exit code was lost: 0 with a failing test")
	}
	for _, want := range []string{
		"--- FAIL: TestFails", // a failure's output is shown
		"sample_test.go:18: the bytes differ",
		"skipped:\n",
		"  sample TestSkipsWithAReason: containerd is not running: start it with sudo scripts/containerd-up.sh\n",
		"  sample TestSkipsSilently: (no reason given)\n",
		"  sample TestParent/child: needs root\n",
		"failed:\n  sample TestFails\n",
		"packages 0 ok, 1 failed",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// Passing and skipped tests stay quiet, as in plain go test.
	for _, noise := range []string{"noise a passing test makes", "looking for containerd", "=== RUN"} {
		if strings.Contains(got, noise) {
			t.Errorf("output shows %q", noise)
		}
	}
}

func TestSplitGroups(t *testing.T) {
	g := splitGroups([]string{"-race", "./...", "---", "-C", "hack/envcheck", "-count=1", "./..."})
	if len(g) != 2 || g[0].dir != "." || strings.Join(g[0].args, " ") != "-race ./..." ||
		g[1].dir != "hack/envcheck" || strings.Join(g[1].args, " ") != "-count=1 ./..." {
		t.Errorf("groups %+v", g)
	}
}
