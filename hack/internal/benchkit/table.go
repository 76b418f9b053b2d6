package benchkit

import (
	"fmt"
	"strings"
)

// WriteAligned writes rows as columns: the first left-aligned, the others
// right-aligned, three spaces apart (a test splits a row on three spaces
// or more), with no space at a line's end.
func WriteAligned(b *strings.Builder, rows [][]string) {
	if len(rows) == 0 {
		return
	}
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	for _, r := range rows {
		var line strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-len([]rune(c)))
			if i == 0 {
				line.WriteString(c + pad)
			} else {
				line.WriteString("   " + pad + c)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
}

// LoadCell is a load, "?" where /proc/loadavg could not be read (WaitQuiet
// gives -1), and "busy" when a run started above the threshold.
func LoadCell(load float64, busy bool) string {
	switch {
	case load < 0:
		return "?"
	case busy:
		return fmt.Sprintf("%.2f busy", load)
	}
	return fmt.Sprintf("%.2f", load)
}
