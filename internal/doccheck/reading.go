package doccheck

import (
	"fmt"
	"io/fs"
	"math"
	"path"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// The reading speeds the course's stated reading times assume. A learner
// reads a lab's README whole — prose, commands and what they print — so
// all of it counts; only HTML comments (the README runner's markers,
// invisible on GitHub) do not. Chinese is counted in characters, as
// Chinese reading speed is: an English word is not a unit there.
const (
	WordsPerMinute   = 200 // English, and the commands and output of a zh-CN page
	HanziPerMinute   = 400 // Chinese characters of a zh-CN page
	ReadingTolerance = 0.2 // a stated time may be this far off the measured one…
	RoundingSlack    = 0.5 // …or half a minute, since times are stated in whole minutes
)

// Reading is how much there is to read on a page.
type Reading struct {
	Words int // runs of non-space characters with a letter or digit, Chinese characters left out
	Hanzi int // Chinese characters
}

// Minutes is the time to read it at WordsPerMinute and HanziPerMinute.
func (r Reading) Minutes() float64 {
	return float64(r.Words)/WordsPerMinute + float64(r.Hanzi)/HanziPerMinute
}

// Measure counts what there is to read in a Markdown page.
func Measure(md []byte) Reading {
	text := commentRE.ReplaceAllString(string(md), " ")
	var r Reading
	var b strings.Builder
	for _, c := range text {
		if unicode.Is(unicode.Han, c) {
			r.Hanzi++
			b.WriteByte(' ') // a Chinese character also ends an English word
			continue
		}
		b.WriteRune(c)
	}
	for _, f := range strings.Fields(b.String()) {
		if strings.IndexFunc(f, func(c rune) bool { return unicode.IsLetter(c) || unicode.IsDigit(c) }) >= 0 {
			r.Words++
		}
	}
	return r
}

// StatedTime is a reading time a page states for another page: a row of
// a table with a "reading" (阅读) column, naming the page it is for in a
// link; or that table's total row ("all", "全部"), for every row above it.
type StatedTime struct {
	File    string   // the page that states it
	Line    int      // where
	For     []string // the pages it is for: one, or every row's for a total
	Minutes float64  // what it says
	Text    string   // as written
}

var (
	tableRowRE  = regexp.MustCompile(`^\s*\|(.*)\|\s*$`)
	separatorRE = regexp.MustCompile(`^[\s|:-]*-[\s|:-]*$`)
	linkMDRE    = regexp.MustCompile(`\]\(([^)#\s]+\.md)(?:#[^)]*)?\)`)
	// 25 min, 1 h 5 min, 4 h 0 min; 25 分钟, 1 小时 5 分, 4 小时 0 分钟
	durationRE = regexp.MustCompile(`^(?:(\d+)\s*(?:h|小时)\s*)?(?:(\d+)\s*(?:min|分钟|分))?$`)
)

// StatedTimes finds every reading time stated in the pages (slash paths
// in fsys), in tables whose header has a column named "reading" or
// "阅读". A row whose reading cell cannot be read as a time is a problem,
// not a time to skip.
func StatedTimes(fsys fs.FS, pages []string) ([]StatedTime, []Problem) {
	var times []StatedTime
	var problems []Problem
	for _, name := range pages {
		md, err := fs.ReadFile(fsys, name)
		if err != nil {
			problems = append(problems, Problem{name, 0, "cannot read the page"})
			continue
		}
		col := -1 // the reading column of the table we are in, -1 for none
		inTable := false
		var rows []string
		for i, line := range strings.Split(string(md), "\n") {
			m := tableRowRE.FindStringSubmatch(line)
			if m == nil {
				col, rows, inTable = -1, nil, false
				continue
			}
			cells := strings.Split(m[1], "|")
			if !inTable { // the header
				inTable = true
				for j, c := range cells {
					h := strings.ToLower(strings.TrimSpace(c))
					if strings.HasPrefix(h, "reading") || strings.HasPrefix(h, "阅读") {
						col = j
					}
				}
				continue
			}
			if col < 0 || col >= len(cells) || separatorRE.MatchString(m[1]) {
				continue // no reading column, or the header's separator row
			}
			cell := strings.TrimSpace(cells[col])
			row := m[1]
			total := strings.Contains(row, "**all**") || strings.Contains(row, "**全部**")
			var target string
			if !total {
				l := linkMDRE.FindStringSubmatch(row)
				if l == nil {
					problems = append(problems, Problem{name, i + 1, "a row with a reading time names no page (a link to a .md file)"})
					continue
				}
				target = path.Clean(path.Join(path.Dir(name), l[1]))
				rows = append(rows, target) // the total counts it, whatever its own cell says
			}
			minutes, ok := parseDuration(cell)
			if !ok {
				problems = append(problems, Problem{name, i + 1, fmt.Sprintf("reading time %q is not a time like \"25 min\", \"1 h 5 min\", \"25 分钟\" or \"1 小时 5 分\"", cell)})
				continue
			}
			st := StatedTime{File: name, Line: i + 1, Minutes: minutes, Text: cell}
			if total {
				st.For = rows
			} else {
				st.For = []string{target}
			}
			times = append(times, st)
		}
	}
	return times, problems
}

func parseDuration(s string) (float64, bool) {
	s = strings.Trim(strings.TrimSpace(s), "*")
	m := durationRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil || m[1] == "" && m[2] == "" {
		return 0, false
	}
	h, _ := strconv.Atoi(m[1])
	min, _ := strconv.Atoi(m[2])
	return float64(60*h + min), true
}

// CheckReadingTimes measures the pages each stated time is for and says
// which times are off by more than ReadingTolerance (and RoundingSlack).
func CheckReadingTimes(fsys fs.FS, times []StatedTime) []Problem {
	var problems []Problem
	measured := map[string]float64{}
	for _, st := range times {
		var want float64
		ok := true
		for _, p := range st.For {
			m, seen := measured[p]
			if !seen {
				md, err := fs.ReadFile(fsys, p)
				if err != nil {
					problems = append(problems, Problem{st.File, st.Line, fmt.Sprintf("reading time for %s: it cannot be read", p)})
					ok = false
					break
				}
				m = Measure(md).Minutes()
				measured[p] = m
			}
			want += m
		}
		if !ok || len(st.For) == 0 {
			continue
		}
		if math.Abs(st.Minutes-want) > math.Max(ReadingTolerance*want, RoundingSlack) {
			what := st.For[0]
			if len(st.For) > 1 {
				what = fmt.Sprintf("the %d pages above", len(st.For))
			}
			problems = append(problems, Problem{st.File, st.Line, fmt.Sprintf(
				"reading time %q for %s is off by more than %.0f %%: it measures %s (%d words a minute, %d Chinese characters a minute)",
				st.Text, what, 100*ReadingTolerance, FormatMinutes(want), WordsPerMinute, HanziPerMinute)})
		}
	}
	return problems
}

// FormatMinutes writes a measured time the way the course's tables do.
func FormatMinutes(m float64) string {
	n := int(math.Round(m))
	if n < 60 {
		return fmt.Sprintf("%d min", n)
	}
	return fmt.Sprintf("%d h %d min", n/60, n%60)
}
