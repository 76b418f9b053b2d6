package doccheck

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"
)

// TestStatedReadingTimes: every reading time the course states (the
// tables of docs/course.md and its zh-CN twin) is within 20 % of what the
// README it is for measures today, and so is each table's total.
func TestStatedReadingTimes(t *testing.T) {
	fsys := os.DirFS("../..")
	pages, err := Pages(fsys)
	if err != nil {
		t.Fatal(err)
	}
	times, problems := StatedTimes(fsys, pages)
	problems = append(problems, CheckReadingTimes(fsys, times)...)
	for _, p := range problems {
		t.Error(p)
	}
	// a check that finds nothing to check is broken, not passing: 19 labs
	// and a total, in English and in Chinese
	if len(times) < 40 {
		t.Errorf("found %d stated reading times, want at least 40 (docs/course.md and docs/course.zh-CN.md)", len(times))
	}
}

// TestMeasure: what counts as reading, in both languages.
func TestMeasure(t *testing.T) {
	for md, want := range map[string]Reading{
		"Hello, world: `go run ./labs/07-pleg`.\n": {Words: 5},
		"| a | b |\n|---|---|\n| 1 — 2 | |\n":      {Words: 4}, // table rules and dashes are no words
		"<!-- run: skip reason=\"long\" -->\ntext": {Words: 1}, // the runner's markers are not read
		"运行 lab 00，然后看 `kubectl get nodes`。":       {Words: 5, Hanzi: 5},
		"节点Ready了": {Words: 1, Hanzi: 3},
	} {
		if got := Measure([]byte(md)); got != want {
			t.Errorf("Measure(%q) = %+v, want %+v", md, got, want)
		}
	}
	if got := (Reading{Words: 400, Hanzi: 800}).Minutes(); got != 4 {
		t.Errorf("400 words and 800 Chinese characters: %v min, want 4", got)
	}
}

// TestReadingTimesCatchStaleOnes: each broken table gives exactly the
// problem it is made for; the good one gives none.
func TestReadingTimesCatchStaleOnes(t *testing.T) {
	words := func(n int) string { return strings.Repeat("word ", n) }
	base := fstest.MapFS{
		"labs/01-a/README.md":       {Data: []byte(words(2000))},                      // 10 min
		"labs/02-b/README.md":       {Data: []byte(words(1000))},                      // 5 min
		"labs/01-a/README.zh-CN.md": {Data: []byte(strings.Repeat("读", 4000))},        // 10 min
		"labs/02-b/README.zh-CN.md": {Data: []byte(strings.Repeat("读", 1000) + "ok")}, // 2.5 min + 1 word
	}
	table := func(a, b, total string) string {
		return "# Course\n\n| lab | run | reading (est.) |\n|---|---|---|\n" +
			"| [01-a](../labs/01-a/README.md) | 1 min | " + a + " |\n" +
			"| [02-b](../labs/02-b/README.md) | 2 min | " + b + " |\n" +
			"| **all** | 3 min | " + total + " |\n\nAfter the table.\n"
	}
	cases := []struct {
		name, page, want string
	}{
		{"good", table("10 min", "5 min", "15 min"), ""},
		{"within 20 %", table("12 min", "4 min", "17 min"), ""},
		{"stale row", table("25 min", "5 min", "15 min"), `reading time "25 min" for labs/01-a/README.md is off by more than 20 %: it measures 10 min`},
		{"stale total", table("10 min", "5 min", "4 h 0 min"), `reading time "4 h 0 min" for the 2 pages above is off`},
		{"not a time", table("10 min", "soon", "15 min"), `reading time "soon" is not a time`},
		{"no page", "| lab | reading |\n|---|---|\n| a | 3 min |\n", "names no page"},
		{"missing page", "| lab | reading |\n|---|---|\n| [c](../labs/03-c/README.md) | 3 min |\n", "labs/03-c/README.md: it cannot be read"},
		{"Chinese", "| 实验 | 阅读（估算） |\n|---|---|\n| [01-a](../labs/01-a/README.zh-CN.md) | 10 分钟 |\n" +
			"| [02-b](../labs/02-b/README.zh-CN.md) | 3 分钟 |\n| **全部** | 13 分钟 |\n", ""},
		{"Chinese stale", "| 实验 | 阅读（估算） |\n|---|---|\n| [01-a](../labs/01-a/README.zh-CN.md) | 1 小时 0 分 |\n",
			`reading time "1 小时 0 分" for labs/01-a/README.zh-CN.md is off`},
		{"no reading column", "| lab | time |\n|---|---|\n| a | 3 min |\n", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for k, v := range base {
				fsys[k] = v
			}
			fsys["docs/course.md"] = &fstest.MapFile{Data: []byte(tc.page)}
			times, problems := StatedTimes(fsys, []string{"docs/course.md"})
			problems = append(problems, CheckReadingTimes(fsys, times)...)
			if tc.want == "" {
				for _, p := range problems {
					t.Errorf("a good table gave: %s", p)
				}
				return
			}
			if len(problems) != 1 || !strings.Contains(problems[0].String(), tc.want) {
				t.Errorf("want one problem with %q, got %q", tc.want, problems)
			}
		})
	}
}
