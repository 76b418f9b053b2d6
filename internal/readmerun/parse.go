package readmerun

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Kind of a command block.
type Kind int

const (
	// Run runs the block and checks its exit code.
	Run Kind = iota
	// Background starts the block and goes on once it is ready.
	Background
	// Skip shows the block without running it.
	Skip
)

// Block is one command block of a README and what it must do.
type Block struct {
	Line    int    // line of the ``` fence, for messages
	Script  string // the commands, as shown
	Kind    Kind
	Exit    int           // Run: the exit code wanted
	Ready   string        // Background: the text that says it is ready
	Session bool          // Background: keep it until all READMEs ran
	Timeout time.Duration // 0: the runner's default
	Reason  string        // Skip: why it cannot run
	// Lab00 marks a block that shows what lab 00's cluster does where
	// another differs by design (run: lab00): on a cluster given with
	// UseCluster it is shown, not run.
	Lab00 bool
	// Output is the ```text block marked <!-- output --> that follows, if
	// any; OutputLine its line.
	Output     *string
	OutputLine int
}

// fence is one fenced block of a Markdown file.
type fence struct {
	line   int
	info   string // after the backticks: "sh", "text", …
	body   string
	marker string // the <!-- … --> comment on the line before, if any
}

// fences lists the fenced code blocks of md with the comment just before
// each.
func fences(md []byte) ([]fence, error) {
	var out []fence
	sc := bufio.NewScanner(bytes.NewReader(md))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var prev string
	var cur *fence
	var body strings.Builder
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if cur != nil {
			if strings.HasPrefix(trimmed, "```") && strings.Trim(trimmed, "`") == "" {
				cur.body = body.String()
				out = append(out, *cur)
				cur = nil
				prev = ""
				continue
			}
			body.WriteString(line)
			body.WriteByte('\n')
			continue
		}
		if strings.HasPrefix(trimmed, "```") {
			cur = &fence{line: n, info: strings.TrimSpace(strings.TrimLeft(trimmed, "`"))}
			if strings.HasPrefix(prev, "<!--") && strings.HasSuffix(prev, "-->") {
				cur.marker = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(prev, "<!--"), "-->"))
			}
			body.Reset()
			continue
		}
		if trimmed != "" {
			prev = trimmed
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("line %d: code block never closed", cur.line)
	}
	return out, sc.Err()
}

// isCommand says whether a fence shows commands a learner types.
func isCommand(info string) bool {
	switch strings.Fields(info + " x")[0] {
	case "sh", "bash", "shell", "console":
		return true
	}
	return false
}

// Parse reads the command blocks of a README. Every ```sh block must carry
// a run marker; an <!-- output --> block must follow a run block.
func Parse(md []byte) ([]Block, error) {
	fs, err := fences(md)
	if err != nil {
		return nil, err
	}
	var blocks []Block
	for i, f := range fs {
		if f.marker == "output" {
			if i == 0 || len(blocks) == 0 || blocks[len(blocks)-1].Line != fs[i-1].line {
				return nil, fmt.Errorf("line %d: an <!-- output --> block must follow a command block", f.line)
			}
			b := &blocks[len(blocks)-1]
			if b.Kind == Skip {
				return nil, fmt.Errorf("line %d: output shown for a skipped block (line %d) cannot be checked: show it as plain text", f.line, b.Line)
			}
			body := f.body
			b.Output, b.OutputLine = &body, f.line
			continue
		}
		if !isCommand(f.info) {
			if strings.HasPrefix(f.marker, "run") {
				return nil, fmt.Errorf("line %d: a run marker on a ```%s block: commands go in ```sh blocks", f.line, f.info)
			}
			continue
		}
		b, err := parseMarker(f.marker)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", f.line, err)
		}
		b.Line, b.Script = f.line, f.body
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// parseMarker reads `run`, `run: exit=1 timeout=5m`, `run: background
// ready="text" session`, `run: skip reason="text"`, `run: exit=1 lab00`.
func parseMarker(m string) (Block, error) {
	var b Block
	rest, ok := strings.CutPrefix(m, "run")
	if !ok {
		return b, fmt.Errorf("a command block without a run marker (<!-- run -->, <!-- run: background ready=\"…\" -->, or <!-- run: skip reason=\"…\" -->); got %q", m)
	}
	rest = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), ":"))
	for rest != "" {
		var key, val string
		key, rest, _ = strings.Cut(rest, " ")
		if k, v, ok := strings.Cut(key, "="); ok {
			key = k
			if strings.HasPrefix(v, `"`) {
				// a quoted value may hold spaces: read up to the closing quote
				full := v + " " + rest
				end := strings.Index(full[1:], `"`)
				if end < 0 {
					return b, fmt.Errorf("run marker %q: unclosed quote", m)
				}
				val, rest = full[1:end+1], full[end+2:]
			} else {
				val = v
			}
		}
		rest = strings.TrimSpace(rest)
		switch key {
		case "background":
			b.Kind = Background
		case "skip":
			b.Kind = Skip
		case "session":
			b.Session = true
		case "lab00":
			b.Lab00 = true
		case "ready":
			b.Ready = val
		case "reason":
			b.Reason = val
		case "exit":
			n, err := strconv.Atoi(val)
			if err != nil {
				return b, fmt.Errorf("run marker %q: exit=%q is not a number", m, val)
			}
			b.Exit = n
		case "timeout":
			d, err := time.ParseDuration(val)
			if err != nil {
				return b, fmt.Errorf("run marker %q: %v", m, err)
			}
			b.Timeout = d
		default:
			return b, fmt.Errorf("run marker %q: unknown option %q", m, key)
		}
	}
	switch {
	case b.Kind == Background && b.Ready == "":
		return b, fmt.Errorf("run marker %q: a background block needs ready=\"text it prints when ready\"", m)
	case b.Kind == Skip && b.Reason == "":
		return b, fmt.Errorf("run marker %q: a skipped block needs reason=\"why it cannot run in CI\"", m)
	}
	return b, nil
}

// SameBlocks checks that a translation carries the same command and output
// blocks as the original, in the same order.
func SameBlocks(original, translation []Block) error {
	if len(original) != len(translation) {
		return fmt.Errorf("%d command blocks, the English README has %d", len(translation), len(original))
	}
	for i := range original {
		o, t := original[i], translation[i]
		if o.Script != t.Script || o.Kind != t.Kind || o.Exit != t.Exit || o.Ready != t.Ready || o.Session != t.Session {
			return fmt.Errorf("line %d: command block %d differs from the English README's (line %d)", t.Line, i+1, o.Line)
		}
		if (o.Output == nil) != (t.Output == nil) || (o.Output != nil && *o.Output != *t.Output) {
			return fmt.Errorf("line %d: the output shown after command block %d differs from the English README's (line %d)", t.Line, i+1, o.Line)
		}
	}
	return nil
}
