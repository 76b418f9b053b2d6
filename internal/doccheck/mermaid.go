package doccheck

import (
	"fmt"
	"strings"
)

// mermaidTypes are the diagram types the course uses, all of which GitHub
// renders.
var mermaidTypes = []string{"flowchart", "graph", "sequenceDiagram", "stateDiagram-v2", "timeline", "gantt"}

// MermaidShape checks what can be checked of a mermaid block without
// mermaid itself: it starts with a diagram type GitHub renders, its
// quotes close on every line and, in a flowchart, every node's brackets
// close on the node's line.
func MermaidShape(body string) error {
	lines := strings.Split(body, "\n")
	first := ""
	for _, l := range lines {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "%%") {
			first = t
			break
		}
	}
	kind, _, _ := strings.Cut(first, " ")
	known := false
	for _, k := range mermaidTypes {
		known = known || kind == k
	}
	if !known {
		return fmt.Errorf("starts with %q: want one of %s", first, strings.Join(mermaidTypes, ", "))
	}
	var stack []rune
	pairs := map[rune]rune{')': '(', ']': '[', '}': '{'}
	for n, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "%%") {
			continue
		}
		if strings.Count(l, `"`)%2 != 0 {
			return fmt.Errorf("line %d: a quote does not close: %s", n+1, l)
		}
		if strings.Contains(unquoted(l), ";") {
			return fmt.Errorf("line %d: a ';' ends a statement in mermaid (outside a quoted label): %s", n+1, l)
		}
		if strings.Contains(l, "\t") {
			return fmt.Errorf("line %d: a tab (indent with spaces): %s", n+1, l)
		}
		if kind != "flowchart" && kind != "graph" {
			continue // messages and notes after ':' are free text
		}
		quoted := false
		for _, r := range l {
			switch {
			case r == '"':
				quoted = !quoted
			case quoted:
			case r == '(' || r == '[' || r == '{':
				stack = append(stack, r)
			case r == ')' || r == ']' || r == '}':
				if len(stack) == 0 || stack[len(stack)-1] != pairs[r] {
					return fmt.Errorf("line %d: %q closes nothing: %s", n+1, r, l)
				}
				stack = stack[:len(stack)-1]
			}
		}
		// a node's brackets close on its own line
		if len(stack) > 0 {
			return fmt.Errorf("line %d: %q is not closed on its line: %s", n+1, stack[len(stack)-1], l)
		}
	}
	return nil
}

// unquoted is a line without its "quoted" parts.
func unquoted(l string) string {
	var b strings.Builder
	quoted := false
	for _, r := range l {
		if r == '"' {
			quoted = !quoted
			continue
		}
		if !quoted {
			b.WriteRune(r)
		}
	}
	return b.String()
}
