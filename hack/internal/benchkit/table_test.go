package benchkit

import (
	"strings"
	"testing"
)

// TestTableAligned: the first column left-aligned, the others right-aligned
// three spaces apart, widths in characters (not bytes: "→", "–"), and no
// space at a line's end.
func TestTableAligned(t *testing.T) {
	var b strings.Builder
	WriteAligned(&b, [][]string{
		{"", "KWOK", "ours"},
		{"pod create → Running", "600 ms (500–700)", "5 ms"},
		{"peak RSS", "1 MiB", "12 MiB"},
	})
	want := "" +
		"                                   KWOK     ours\n" +
		"pod create → Running   600 ms (500–700)     5 ms\n" +
		"peak RSS                          1 MiB   12 MiB\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	WriteAligned(&b, [][]string{{""}})
	if b.String() != "\n" {
		t.Errorf("a table of no column: %q, want one empty line", b.String())
	}
}

// TestTableLoadCell: a load, "?" where it could not be read, and "busy"
// when the run started above the threshold.
func TestTableLoadCell(t *testing.T) {
	for _, c := range []struct {
		load float64
		busy bool
		want string
	}{{0.456, false, "0.46"}, {3.5, true, "3.50 busy"}, {-1, false, "?"}, {-1, true, "?"}} {
		if got := LoadCell(c.load, c.busy); got != c.want {
			t.Errorf("LoadCell(%v, %v) = %q, want %q", c.load, c.busy, got, c.want)
		}
	}
}
