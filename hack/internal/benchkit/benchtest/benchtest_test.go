package benchtest

import (
	"slices"
	"strings"
	"testing"
)

// TestTableRows: the rows after the header, cut at three spaces or more,
// up to the first blank line; no header, no rows.
func TestTableRows(t *testing.T) {
	table := "title line\n\n                  KWOK   ours\nnodes → Ready   4.5 s  (1–2)   3 s\npeak RSS          1 MiB   2 MiB\n\nHow: ...\n"
	header := func(l string) bool { return strings.Contains(l, "KWOK") }
	rows, ok := Rows(table, header)
	want := [][]string{{"nodes → Ready", "4.5 s  (1–2)", "3 s"}, {"peak RSS", "1 MiB", "2 MiB"}}
	if !ok || !slices.EqualFunc(rows, want, slices.Equal) {
		t.Errorf("rows %q (%v), want %q", rows, ok, want)
	}
	if rows, ok := Rows("no table\n", header); ok || rows != nil {
		t.Errorf("no header: %q %v", rows, ok)
	}
}
