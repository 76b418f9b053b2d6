package readmerun

import (
	"fmt"
	"regexp"
	"strings"
)

// The parts of a line that differ from run to run, replaced by a
// placeholder before lines are compared. Order matters: an address before
// its numbers, a duration before its digits.
var normalisers = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`), ""}, // terminal colours
	// the live view's URL carries a new token each run (internal/liveview)
	{regexp.MustCompile(`\?token=[A-Za-z0-9_-]+`), "?token=<token>"},
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "<uid>"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?`), "<time>"},
	{regexp.MustCompile(`\b\d\d:\d\d:\d\d(\.\d+)?\b`), "<time>"},
	{regexp.MustCompile(`\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}(/\d+)?\b`), "<ip>"},
	// crictl's CREATED column: docker/go-units HumanDuration + " ago"
	{regexp.MustCompile(`\b(Less than a second|About a minute|About an hour|\d+ (second|minute|hour|day|week|month|year)s?) ago\b`), "<ago>"},
	{regexp.MustCompile(`\b(\d+(\.\d+)?(ns|µs|us|ms|s|m|h))+\b`), "<dur>"},
	{regexp.MustCompile(`\d+(\.\d+)?`), "<n>"},
	{regexp.MustCompile(`\s+`), " "},
	// a right-aligned number in brackets ("[%5.2fs]"): " 9.87s" and "10.02s"
	{regexp.MustCompile(`\[ `), "["},
}

// alnumRun is a run of letters and digits: a candidate ID (container,
// sandbox and image IDs, hashes) when it is all hex. Not \b: a pod's log
// folder is NAMESPACE_NAME_UID, and _ is a word character to \b.
var alnumRun = regexp.MustCompile(`[0-9A-Za-z]+`)

// Normalise a line for comparison.
func Normalise(line string) string {
	for i, n := range normalisers {
		if i == 6 { // the "ago" normaliser
			// after addresses and ages, before durations and numbers: a hex ID is a
			// word of 6 or more hex digits with a digit and a letter in it. It
			// becomes <n>, as a number does: a hash prefix is sometimes all
			// digits ("56803245", 1 in 40 for 8 hex digits), and must still
			// match the README's "d8dc5a56".
			line = alnumRun.ReplaceAllStringFunc(line, func(w string) string {
				if len(w) >= 6 && strings.Trim(w, "0123456789abcdef") == "" &&
					strings.ContainsAny(w, "0123456789") && strings.ContainsAny(w, "abcdef") {
					return "<n>"
				}
				return w
			})
		}
		line = n.re.ReplaceAllString(line, n.with)
	}
	return strings.TrimSpace(line)
}

// isElision is a line that stands for lines left out.
func isElision(line string) bool {
	t := strings.TrimSpace(line)
	return t == "..." || t == "…"
}

// Match checks that every line of shown (a README's output block) appears
// in actual, in order, once both are normalised. Lines of actual between
// them are allowed (a README shows the lines that teach), but the order is
// the program's.
func Match(shown, actual string) error {
	var got []string
	for _, l := range strings.Split(actual, "\n") {
		got = append(got, Normalise(l))
	}
	at := 0
	for n, line := range strings.Split(strings.TrimRight(shown, "\n"), "\n") {
		if isElision(line) || strings.TrimSpace(line) == "" {
			continue
		}
		want := Normalise(line)
		found := false
		for ; at < len(got); at++ {
			if got[at] == want {
				found, at = true, at+1
				break
			}
		}
		if !found {
			return fmt.Errorf("shown line %d %q is not in the real output (after the lines matched before it); normalised: %q", n+1, line, want)
		}
	}
	return nil
}
