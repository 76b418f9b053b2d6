package readmerun

import (
	"bytes"
	"fmt"
	"os"
	"testing"
)

// ScriptAfter returns the script of the first command block after the line
// heading (e.g. "### The same by hand") of the README at path. For a lab's
// own test that runs one section of its README with more checks than the
// README shows (files, modes, what the cluster holds afterwards), so the
// test runs what the learner reads, not a copy of it.
func ScriptAfter(tb testing.TB, path, heading string) string {
	tb.Helper()
	md, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := blockAfter(md, heading)
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return b.Script
}

// blockAfter is the first command block of md after the line heading.
func blockAfter(md []byte, heading string) (Block, error) {
	at := 0
	for i, line := range bytes.Split(md, []byte("\n")) {
		if string(line) == heading {
			at = i + 1
			break
		}
	}
	if at == 0 {
		return Block{}, fmt.Errorf("no line %q", heading)
	}
	blocks, err := Parse(md)
	if err != nil {
		return Block{}, err
	}
	for _, b := range blocks {
		if b.Line > at {
			return b, nil
		}
	}
	return Block{}, fmt.Errorf("no command block after %q", heading)
}
