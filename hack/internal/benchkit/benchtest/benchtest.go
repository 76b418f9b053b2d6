// Package benchtest is what the benchmarks' tests (hack/fleetbench,
// hack/kubeletbench) share: a whole run at a test's size with all it
// printed in the test's log, flags refused before anything starts, and
// the rows of a printed table, cell by cell.
package benchtest

import (
	"context"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"kubelet-labs/internal/testenv"
)

// Run runs a benchmark's run with a deadline, puts what it printed in the
// test's log (a run that fails is read there first), and stops the test
// on the run's error; it returns the run's results.
func Run[R any](t testing.TB, timeout time.Duration, run func(ctx context.Context, w io.Writer) (R, error)) R {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	log := &testenv.SyncBuffer{}
	results, err := run(ctx, log)
	t.Logf("benchmark output:\n%s", log)
	if err != nil {
		t.Fatal(err)
	}
	return results
}

// Refused is one bad flag: Edit spoils valid options, and the benchmark's
// error must say Want.
type Refused[O any] struct {
	Edit func(*O)
	Want string
}

// CheckRefused runs the benchmark on valid options spoiled by each case,
// and wants an error that says the case's Want.
func CheckRefused[O, R any](t testing.TB, valid O, run func(context.Context, O, io.Writer) (R, error), cases []Refused[O]) {
	t.Helper()
	for _, c := range cases {
		o := valid
		c.Edit(&o)
		if _, err := run(context.Background(), o, &testenv.SyncBuffer{}); err == nil || !strings.Contains(err.Error(), c.Want) {
			t.Errorf("got %v, want %q", err, c.Want)
		}
	}
}

// columns split a table's row: its cells stand three spaces or more apart.
var columns = regexp.MustCompile(`\s{3,}`)

// Rows are the cells of a printed table's rows: the lines after the first
// one header accepts, up to the first blank line. ok is false when no
// line is a header.
func Rows(table string, header func(line string) bool) (rows [][]string, ok bool) {
	lines := strings.Split(table, "\n")
	for i, l := range lines {
		if !header(l) {
			continue
		}
		for _, l := range lines[i+1:] {
			if strings.TrimSpace(l) == "" {
				break
			}
			rows = append(rows, columns.Split(strings.TrimSpace(l), -1))
		}
		return rows, true
	}
	return nil, false
}
