package benchkit

import (
	"fmt"
	"slices"
	"time"
)

// RoundOrder is the tools' order in a round: round r starts with the r-th,
// so that none always runs first (on a fresh control plane) or always
// right after another (in its load).
func RoundOrder(tools []string, round int) []string {
	k := round % len(tools)
	return append(slices.Clone(tools[k:]), tools[:k]...)
}

// MedianValue is the middle value; of an even count, the lower middle one
// (a value that was measured, not an average of two).
func MedianValue[T int | int64 | float64 | time.Duration](v []T) T {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// Spread is " (lowest–highest)" of values, each in format; "" for fewer
// than two.
func Spread(v []float64, format func(float64) string) string {
	if len(v) < 2 {
		return ""
	}
	return fmt.Sprintf(" (%s–%s)", format(slices.Min(v)), format(slices.Max(v)))
}

// SpreadValue is a bracket's number: three significant digits, never in
// e-notation (a peak RSS of 1,230 MiB printed as 1.23e+03).
func SpreadValue(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}
