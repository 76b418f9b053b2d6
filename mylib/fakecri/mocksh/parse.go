package mocksh

import (
	"fmt"
	"strings"
)

// This file parses the small shell language the mock understands. It is a
// teaching mock, not a POSIX shell: the grammar is
//
//	list    := andor { (";" | newline) andor }
//	andor   := command { ("&&" | "||") command }
//	command := "while" list "do" list "done" | word { word | redirect }
//	word    := literal, '…' and "…" quoting, backslash escapes, $NAME ${NAME} $?
//	redirect := [1|2]>&1 | [1|2]>&2 | [1|2]>/dev/null | [1|2]>>/dev/null
//
// The redirections are the ones scripts use to pick a stream (echo oops
// >&2, cmd 2>&1, cmd >/dev/null); there is no filesystem to write to, so a
// redirection to a file is refused, like pipes, input redirection,
// background jobs, subshells and command substitution, with a clear "not
// supported" error instead of being half-handled. Variable expansion never
// splits fields.

// word is a shell word: literal text and variable references, joined at
// run time so `$?` sees the status of the previous command.
type word []wordPart

type wordPart struct {
	text  string // literal text, or the variable name when isVar
	isVar bool
}

// literal reports the word's text if it contains no expansion.
func (w word) literal() (string, bool) {
	var b strings.Builder
	for _, p := range w {
		if p.isVar {
			return "", false
		}
		b.WriteString(p.text)
	}
	return b.String(), true
}

type node interface{ isNode() }

type simpleCmd struct {
	words  []word
	redirs []redirect
}

// redirect sends fd (1 or 2) to another fd (dup 1 or 2) or, with dup 0,
// to /dev/null. Applied left to right, as sh does: 2>&1 >/dev/null keeps
// stderr on the old stdout.
type redirect struct{ fd, dup int }

type whileLoop struct{ cond, body list }

func (simpleCmd) isNode() {}
func (whileLoop) isNode() {}

// andOr is `first && next || next …`, evaluated left to right.
type andOr struct {
	first node
	rest  []andOrTail
}

type andOrTail struct {
	op string // "&&" or "||"
	n  node
}

type list []andOr

type tokKind int

const (
	tokWord  tokKind = iota
	tokOp            // ; && || and newline
	tokRedir         // a redirection; a file target is the next word
)

type token struct {
	kind tokKind
	op   string
	w    word
	r    redirect
	file bool // tokRedir whose target is the next word (/dev/null)
}

// tokenize splits a script into words and operators.
func tokenize(src string) ([]token, error) {
	var toks []token
	var cur word
	inWord := false
	var lit strings.Builder
	flushLit := func() {
		if lit.Len() > 0 {
			cur = append(cur, wordPart{text: lit.String()})
			lit.Reset()
		}
	}
	endWord := func() {
		flushLit()
		if inWord {
			toks = append(toks, token{kind: tokWord, w: cur})
		}
		cur, inWord = nil, false
	}
	// readVar parses $NAME, ${NAME} or $? starting after the '$' at i and
	// returns the index after it; a lone '$' is literal.
	readVar := func(i int) (int, error) {
		if i >= len(src) {
			lit.WriteByte('$')
			return i, nil
		}
		switch c := src[i]; {
		case c == '?' || c == '$':
			flushLit()
			cur = append(cur, wordPart{text: string(c), isVar: true})
			return i + 1, nil
		case c == '{':
			end := strings.IndexByte(src[i:], '}')
			if end < 0 {
				return 0, fmt.Errorf("missing '}'")
			}
			name := src[i+1 : i+end]
			if !validName(name) && name != "?" {
				return 0, fmt.Errorf("${%s}: bad substitution", name)
			}
			flushLit()
			cur = append(cur, wordPart{text: name, isVar: true})
			return i + end + 1, nil
		case c == '(':
			return 0, fmt.Errorf("command substitution $(...) is not supported by the mock shell")
		case isNameStart(c):
			j := i
			for j < len(src) && isNameChar(src[j]) {
				j++
			}
			flushLit()
			cur = append(cur, wordPart{text: src[i:j], isVar: true})
			return j, nil
		default:
			lit.WriteByte('$')
			return i, nil
		}
	}

	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r':
			endWord()
			i++
		case c == '\n' || c == ';':
			endWord()
			toks = append(toks, token{kind: tokOp, op: ";"})
			i++
		case c == '#' && !inWord:
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '&' || c == '|':
			endWord()
			if i+1 < len(src) && src[i+1] == c {
				toks = append(toks, token{kind: tokOp, op: string([]byte{c, c})})
				i += 2
				continue
			}
			if c == '|' {
				return nil, fmt.Errorf("pipes are not supported by the mock shell")
			}
			return nil, fmt.Errorf("background jobs (&) are not supported by the mock shell")
		case c == '<':
			return nil, fmt.Errorf("input redirection is not supported by the mock shell")
		case c == '>':
			// "2>" and "1>": a lone unquoted digit right before '>' is the fd.
			fd := 1
			if d := lit.String(); inWord && len(cur) == 0 && (d == "1" || d == "2") {
				fd = int(d[0] - '0')
				lit.Reset()
				inWord = false
			} else {
				endWord()
			}
			i++
			if i < len(src) && src[i] == '>' { // >> appends; same thing for /dev/null
				i++
			}
			if i < len(src) && src[i] == '&' {
				if i+1 < len(src) && (src[i+1] == '1' || src[i+1] == '2') {
					toks = append(toks, token{kind: tokRedir, r: redirect{fd: fd, dup: int(src[i+1] - '0')}})
					i += 2
					continue
				}
				return nil, fmt.Errorf("only >&1 and >&2 are supported by the mock shell")
			}
			toks = append(toks, token{kind: tokRedir, r: redirect{fd: fd}, file: true})
		case c == '(' || c == ')' || c == '`':
			return nil, fmt.Errorf("subshells and command substitution are not supported by the mock shell")
		case c == '\\':
			inWord = true
			if i+1 < len(src) {
				if src[i+1] != '\n' { // backslash-newline is a line continuation
					lit.WriteByte(src[i+1])
				}
				i += 2
			} else {
				lit.WriteByte('\\')
				i++
			}
		case c == '\'':
			inWord = true
			end := strings.IndexByte(src[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unterminated quoted string")
			}
			lit.WriteString(src[i+1 : i+1+end])
			i += end + 2
		case c == '"':
			inWord = true
			i++
			closed := false
			for i < len(src) && !closed {
				switch d := src[i]; d {
				case '"':
					closed = true
					i++
				case '\\':
					if i+1 < len(src) && strings.IndexByte("\"\\$`\n", src[i+1]) >= 0 {
						if src[i+1] != '\n' {
							lit.WriteByte(src[i+1])
						}
						i += 2
					} else {
						lit.WriteByte('\\')
						i++
					}
				case '$':
					j, err := readVar(i + 1)
					if err != nil {
						return nil, err
					}
					i = j
				case '`':
					return nil, fmt.Errorf("command substitution is not supported by the mock shell")
				default:
					lit.WriteByte(d)
					i++
				}
			}
			if !closed {
				return nil, fmt.Errorf("unterminated quoted string")
			}
		case c == '$':
			inWord = true
			j, err := readVar(i + 1)
			if err != nil {
				return nil, err
			}
			i = j
		default:
			inWord = true
			lit.WriteByte(c)
			i++
		}
	}
	endWord()
	return toks, nil
}

func isNameStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isNameChar(c byte) bool { return isNameStart(c) || (c >= '0' && c <= '9') }

func validName(s string) bool {
	if s == "" || !isNameStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isNameChar(s[i]) {
			return false
		}
	}
	return true
}

// parseScript turns a script into a list.
func parseScript(src string) (list, error) {
	toks, err := tokenize(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	l, err := p.list(nil)
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.toks) {
		w, _ := p.toks[p.pos].w.literal()
		return nil, fmt.Errorf("syntax error: unexpected %q", w)
	}
	return l, nil
}

type parser struct {
	toks []token
	pos  int
}

// keyword reports whether the next token is the unquoted keyword kw.
func (p *parser) keyword(kw string) bool {
	if p.pos >= len(p.toks) || p.toks[p.pos].kind != tokWord {
		return false
	}
	s, ok := p.toks[p.pos].w.literal()
	return ok && s == kw
}

// list parses andors until EOF or one of the stop keywords.
func (p *parser) list(stop []string) (list, error) {
	var l list
	for {
		for p.pos < len(p.toks) && p.toks[p.pos].kind == tokOp && p.toks[p.pos].op == ";" {
			p.pos++
		}
		if p.pos >= len(p.toks) {
			return l, nil
		}
		for _, kw := range stop {
			if p.keyword(kw) {
				return l, nil
			}
		}
		a, err := p.andOr()
		if err != nil {
			return nil, err
		}
		l = append(l, a)
	}
}

func (p *parser) andOr() (andOr, error) {
	first, err := p.command()
	if err != nil {
		return andOr{}, err
	}
	a := andOr{first: first}
	for p.pos < len(p.toks) && p.toks[p.pos].kind == tokOp && (p.toks[p.pos].op == "&&" || p.toks[p.pos].op == "||") {
		op := p.toks[p.pos].op
		p.pos++
		// A newline may follow && and ||.
		for p.pos < len(p.toks) && p.toks[p.pos].kind == tokOp && p.toks[p.pos].op == ";" {
			p.pos++
		}
		n, err := p.command()
		if err != nil {
			return andOr{}, err
		}
		a.rest = append(a.rest, andOrTail{op: op, n: n})
	}
	return a, nil
}

func (p *parser) command() (node, error) {
	if p.pos >= len(p.toks) || p.toks[p.pos].kind != tokWord {
		return nil, fmt.Errorf("syntax error: expected a command")
	}
	for _, kw := range []string{"do", "done", "then", "fi", "else", "elif"} {
		if p.keyword(kw) {
			return nil, fmt.Errorf("syntax error: unexpected %q", kw)
		}
	}
	if p.keyword("if") || p.keyword("for") || p.keyword("until") || p.keyword("case") {
		s, _ := p.toks[p.pos].w.literal()
		return nil, fmt.Errorf("%q is not supported by the mock shell (only while loops)", s)
	}
	if p.keyword("while") {
		p.pos++
		cond, err := p.list([]string{"do"})
		if err != nil {
			return nil, err
		}
		if !p.keyword("do") || len(cond) == 0 {
			return nil, fmt.Errorf("syntax error: while without do")
		}
		p.pos++
		body, err := p.list([]string{"done"})
		if err != nil {
			return nil, err
		}
		if !p.keyword("done") {
			return nil, fmt.Errorf("syntax error: do without done")
		}
		p.pos++
		return whileLoop{cond: cond, body: body}, nil
	}
	var c simpleCmd
	for p.pos < len(p.toks) && (p.toks[p.pos].kind == tokWord || p.toks[p.pos].kind == tokRedir) {
		t := p.toks[p.pos]
		p.pos++
		if t.kind == tokWord {
			c.words = append(c.words, t.w)
			continue
		}
		if t.file {
			if p.pos >= len(p.toks) || p.toks[p.pos].kind != tokWord {
				return nil, fmt.Errorf("syntax error: redirection without a target")
			}
			target, _ := p.toks[p.pos].w.literal()
			p.pos++
			if target != "/dev/null" {
				return nil, fmt.Errorf("redirection to %q is not supported by the mock shell (it has no files): use >&2, 2>&1 or >/dev/null", target)
			}
		}
		c.redirs = append(c.redirs, t.r)
	}
	if len(c.words) == 0 {
		return nil, fmt.Errorf("syntax error: redirection without a command")
	}
	return c, nil
}
