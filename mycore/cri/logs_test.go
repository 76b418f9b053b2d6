package cri

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	content := "2026-01-02T15:04:05.000000001Z stdout F hello\n" +
		"2026-01-02T15:04:05.5Z stderr P a long li\n" +
		"2026-01-02T15:04:05.6Z stdout F interleaved\n" +
		"2026-01-02T15:04:05.7Z stderr F ne, split by the runtime\n" +
		"2026-01-02T15:04:06Z stdout F \n"
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	lines, err := ReadLog(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []LogLine{
		{Stream: "stdout", Text: "hello"},
		{Stream: "stdout", Text: "interleaved"},
		{Stream: "stderr", Text: "a long line, split by the runtime"},
		{Stream: "stdout", Text: ""},
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines %+v, want %d", len(lines), lines, len(want))
	}
	for i, w := range want {
		if lines[i].Stream != w.Stream || lines[i].Text != w.Text || lines[i].Time.IsZero() {
			t.Errorf("line %d = %+v, want %+v with a time", i, lines[i], w)
		}
	}
	if lines[2].Time.Nanosecond() != 500_000_000 {
		t.Errorf("a joined line keeps its first part's time, got %v", lines[2].Time)
	}
}

func TestReadLogBadRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(path, []byte("not a log line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLog(path); err == nil {
		t.Fatal("want an error for a malformed record")
	}
}
