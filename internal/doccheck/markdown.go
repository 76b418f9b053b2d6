package doccheck

import (
	"regexp"
	"strings"
	"unicode"
)

// Page is what the checks need of one Markdown file.
type Page struct {
	Path     string // slash path from the repository root
	Headings []Heading
	Links    []Link
	Spans    []Text  // inline code spans
	Prose    []Text  // text outside code, code spans blanked out
	Fences   []Fence // fenced code blocks
}

// Heading is an ATX heading (`## Title`) outside code.
type Heading struct {
	Line  int
	Level int
	Text  string
	Slug  string // GitHub's anchor, with -1, -2… for repeats
}

// Link is an inline link or image, [text](target).
type Link struct {
	Line   int
	Text   string
	Target string
}

// Text is a piece of the page and the line it starts on.
type Text struct {
	Line int
	Text string
}

// Fence is a fenced code block.
type Fence struct {
	Line int // of the opening fence
	Lang string
	Body string
}

var (
	fenceRE   = regexp.MustCompile("^ *(`{3,}|~{3,})\\s*([^`\\s]*)")
	headingRE = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	commentRE = regexp.MustCompile(`(?s)<!--.*?-->`)
)

// Parse reads a Markdown page the way GitHub renders it, as far as the
// checks need: headings and their anchors, links, code spans, fences.
func Parse(path string, md []byte) *Page {
	p := &Page{Path: path}
	lines := strings.Split(strings.ReplaceAll(string(md), "\r\n", "\n"), "\n")
	seen := map[string]int{}
	var para []string
	paraLine := 0
	flush := func() {
		if len(para) > 0 {
			p.addParagraph(paraLine, strings.Join(para, "\n"))
		}
		para = nil
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := fenceRE.FindStringSubmatch(line); m != nil {
			flush()
			marker := m[1]
			start := i + 1
			var body []string
			for i++; i < len(lines); i++ {
				if t := strings.TrimSpace(lines[i]); len(t) >= len(marker) && strings.Trim(t, marker[:1]) == "" {
					break
				}
				body = append(body, lines[i])
			}
			p.Fences = append(p.Fences, Fence{Line: start, Lang: m[2], Body: strings.Join(body, "\n")})
			continue
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			flush()
			text := m[2]
			slug := Slug(text)
			if n, ok := seen[slug]; ok {
				seen[slug] = n + 1
				slug = slug + "-" + itoa(n+1)
			} else {
				seen[slug] = 0
			}
			p.Headings = append(p.Headings, Heading{Line: i + 1, Level: len(m[1]), Text: text, Slug: slug})
			p.addParagraph(i+1, text)
			continue
		}
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		if len(para) == 0 {
			paraLine = i + 1
		}
		para = append(para, line)
	}
	flush()
	return p
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// addParagraph finds the code spans and links of one paragraph (or table
// row block, or heading) that starts on line.
func (p *Page) addParagraph(line int, text string) {
	// HTML comments (the README runner's markers) are not text.
	text = commentRE.ReplaceAllStringFunc(text, blank)
	masked := []byte(text)
	lineAt := func(off int) int { return line + strings.Count(text[:off], "\n") }
	for i := 0; i < len(text); {
		switch text[i] {
		case '\\':
			i += 2
			continue
		case '`':
		default:
			i++
			continue
		}
		j := i
		for j < len(text) && text[j] == '`' {
			j++
		}
		n := j - i
		closing := -1
		for k := j; k < len(text); {
			if text[k] != '`' {
				k++
				continue
			}
			m := k
			for m < len(text) && text[m] == '`' {
				m++
			}
			if m-k == n {
				closing = k
				break
			}
			k = m
		}
		if closing < 0 {
			i = j // a lone backtick run is literal
			continue
		}
		p.Spans = append(p.Spans, Text{Line: lineAt(j), Text: text[j:closing]})
		for k := j; k < closing; k++ {
			if masked[k] != '\n' {
				masked[k] = ' '
			}
		}
		i = closing + n
	}
	m := string(masked)
	p.Prose = append(p.Prose, Text{Line: line, Text: m})
	for off := 0; ; {
		k := strings.Index(m[off:], "](")
		if k < 0 {
			break
		}
		k += off
		off = k + 2
		target, ok := linkTarget(m[k+2:])
		if !ok {
			continue
		}
		p.Links = append(p.Links, Link{Line: lineAt(k), Text: linkText(text, k), Target: target})
	}
}

func blank(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' {
			return r
		}
		return ' '
	}, s)
}

// linkTarget reads the destination of a link from just after "](".
func linkTarget(s string) (string, bool) {
	s = strings.TrimLeft(s, " ")
	if strings.HasPrefix(s, "<") {
		end := strings.IndexByte(s, '>')
		if end < 0 {
			return "", false
		}
		return s[1:end], true
	}
	depth := 0
	for i, r := range s {
		switch {
		case r == '(':
			depth++
		case r == ')':
			if depth == 0 {
				return strings.Fields(s[:i] + " ")[0], i > 0
			}
			depth--
		case unicode.IsSpace(r):
			rest := strings.TrimLeft(s[i:], " \n")
			if rest != "" && (rest[0] == '"' || rest[0] == '\'' || rest[0] == '(' || rest[0] == ')') {
				return s[:i], i > 0
			}
			return "", false
		}
	}
	return "", false
}

// linkText is the text between the [ that matches the ] at end and end.
func linkText(s string, end int) string {
	depth := 0
	for i := end - 1; i >= 0; i-- {
		switch s[i] {
		case ']':
			depth++
		case '[':
			if depth == 0 {
				return s[i+1 : end]
			}
			depth--
		}
	}
	return ""
}

var (
	inlineLinkRE = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTagRE    = regexp.MustCompile(`<[^>]+>`)
)

// Slug is GitHub's anchor for a heading's text (github-slugger, which
// github.com uses): the rendered text in lower case, every character that
// is not a letter, a mark, a number, `_`, `-` or a space dropped, and each
// space made a `-`. Chinese characters are letters, so they stay; the
// full-width punctuation around them (，：（）、) goes.
func Slug(heading string) string {
	text := inlineLinkRE.ReplaceAllString(heading, "$1")
	text = htmlTagRE.ReplaceAllString(text, "")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsNumber(r) || unicode.Is(unicode.Pc, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
