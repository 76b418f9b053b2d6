package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tourSample logs what internal/readmerun logs for a README's blocks and
// what internal/selfcheck prints, in a package whose path ends like the
// README runner's, so go test -json runs it for real.
const tourSample = `package readmerun

import "testing"

func TestLabREADMEs(t *testing.T) {
	t.Run("00-cluster", func(t *testing.T) {
		t.Log("line 26: running in the background, ready:\n$ go run ./labs/00-cluster")
		t.Log("line 40 (1.2s, exit 0):\n$ kubectl get --raw /readyz\n        ok")
		t.Log("line 52 (3.5s, exit 0):\n$ make check LAB=00\n        lab 00 · the control plane — what your run left:\n          done     kube-apiserver answers\n        1 of 1 done.\n        The exercise …")
	})
	t.Run("11-containerd", func(t *testing.T) {
		t.Skip("skipping: labs/11-containerd/README.md runs labs on containerd, and none runs")
	})
	t.Run("12-pleg-containerd", func(t *testing.T) {
		t.Log("line 70: not run (needs root):\n$ sudo true")
		t.Log("line 80 (0.1s, exit 1):\n$ false")
		t.Fatal("line 80: exit code 1, the README says 0")
	})
}
`

func TestTourTableHasALinePerLab(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"go.mod":                          "module sample\n\ngo 1.26\n",
		"internal/readmerun/tour_test.go": tourSample,
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	s := newSummary(&out)
	t.Setenv("GOFLAGS", "")
	if _, err := runGroup(group{dir: dir, args: []string{"-count=1", "./..."}}, s); err != nil {
		t.Fatal(err)
	}
	s.print(time.Second)
	got := out.String()
	t.Logf("output:\n%s", got)
	for _, want := range []string{
		"== the tour (TestLabREADMEs",
		"  00-cluster             pass ",
		"  2 commands  self-check: the control plane: 1 of 1 done\n",
		"  11-containerd          skip ",
		"skipped: skipping: labs/11-containerd/README.md runs labs on containerd, and none runs\n",
		"  12-pleg-containerd     fail ",
		"  1 command (+1 shown only)  self-check: not reached\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the tour table lacks %q", want)
		}
	}
	if strings.Index(got, "== the tour") > strings.Index(got, "== summary") {
		t.Error("the tour table comes after the summary; want it before")
	}
}
