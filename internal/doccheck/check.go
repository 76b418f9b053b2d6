package doccheck

import (
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
)

// Problem is one broken reference, where it is written.
type Problem struct {
	File string
	Line int
	Msg  string
}

func (p Problem) String() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg) }

// Pages lists the Markdown files the checks cover: the root READMEs, every
// page under docs/ and under labs/ (a lab's README, and what sits beside
// it), and every README anywhere else, with the BENCHMARKS record a tool
// keeps beside its README (hack/fleetbench/BENCHMARKS.md), for those
// pages link to each other and to the labs.
// Hidden folders (.labs, .git) and node_modules are not the course's.
func Pages(fsys fs.FS) ([]string, error) {
	var pages []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != "." && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
				return fs.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".md") && (strings.HasPrefix(p, "docs/") || strings.HasPrefix(p, "labs/") || strings.HasPrefix(name, "README") || strings.HasPrefix(name, "BENCHMARKS")) {
			pages = append(pages, p)
		}
		return nil
	})
	slices.Sort(pages)
	return pages, err
}

// Stats counts what was checked, so that a check that silently finds
// nothing to check shows.
type Stats struct {
	Pages, Links, Anchors, Paths, GoTargets, LabNames, Twins int
	External                                                 int // links to other sites, not checked
}

// Check checks the pages (slash paths in fsys, the repository) and returns
// every problem found, in page order, and what it checked.
func Check(fsys fs.FS, pages []string) ([]Problem, Stats) {
	c := &checker{fsys: fsys, parsed: map[string]*Page{}, missing: map[string]bool{}}
	for _, name := range pages {
		c.stats.Pages++
		c.page(name)
	}
	return c.problems, c.stats
}

type checker struct {
	fsys     fs.FS
	parsed   map[string]*Page
	problems []Problem
	stats    Stats
	missing  map[string]bool // file:line:path already reported
}

func (c *checker) report(file string, line int, format string, args ...any) {
	c.problems = append(c.problems, Problem{File: file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// load parses a page once; nil if it cannot be read.
func (c *checker) load(name string) *Page {
	if p, ok := c.parsed[name]; ok {
		return p
	}
	md, err := fs.ReadFile(c.fsys, name)
	var p *Page
	if err == nil {
		p = Parse(name, md)
	}
	c.parsed[name] = p
	return p
}

func (c *checker) exists(name string) (isDir, ok bool) {
	fi, err := fs.Stat(c.fsys, name)
	if err != nil {
		return false, false
	}
	return fi.IsDir(), true
}

func (c *checker) page(name string) {
	p := c.load(name)
	if p == nil {
		c.report(name, 0, "cannot read the page")
		return
	}
	for _, l := range p.Links {
		c.link(p, l)
	}
	for _, t := range c.texts(p) {
		c.goTargets(p, t) // first: a go target's path is said missing once, as a go target
		c.paths(p, t)
		c.labNames(p, t)
	}
	c.twin(p)
}

// texts is everything of a page a path or a command can be written in:
// prose, code spans and code blocks (the commands and what they print).
func (c *checker) texts(p *Page) []Text {
	texts := slices.Clone(p.Prose)
	texts = append(texts, p.Spans...)
	for _, f := range p.Fences {
		texts = append(texts, Text{Line: f.Line + 1, Text: f.Body})
	}
	return texts
}

var schemeRE = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

// link checks a relative link: its file exists, and its #anchor is a
// heading of that file.
func (c *checker) link(p *Page, l Link) {
	t := l.Target
	if schemeRE.MatchString(t) || strings.HasPrefix(t, "//") {
		c.stats.External++
		return // another site: not checked without a network
	}
	c.stats.Links++
	file, frag, _ := strings.Cut(t, "#")
	file, err := url.PathUnescape(file)
	if err != nil {
		c.report(p.Path, l.Line, "link %q: %v", t, err)
		return
	}
	target := p.Path
	if file != "" {
		if strings.HasPrefix(file, "/") {
			target = path.Clean(strings.TrimPrefix(file, "/"))
		} else {
			target = path.Join(path.Dir(p.Path), file)
		}
		if target == ".." || strings.HasPrefix(target, "../") {
			c.report(p.Path, l.Line, "link %q points outside the repository", t)
			return
		}
		if _, ok := c.exists(target); !ok {
			c.report(p.Path, l.Line, "link %q: %s does not exist", t, target)
			return
		}
	}
	if frag == "" {
		return
	}
	c.stats.Anchors++
	anchor, err := url.PathUnescape(frag)
	if err != nil {
		c.report(p.Path, l.Line, "link %q: %v", t, err)
		return
	}
	if !strings.HasSuffix(target, ".md") {
		if !lineAnchorRE.MatchString(anchor) {
			c.report(p.Path, l.Line, "link %q: #%s in %s, which is not a Markdown page (only #L10 or #L10-L20 work there)", t, anchor, target)
		}
		return
	}
	tp := c.load(target)
	if tp == nil {
		c.report(p.Path, l.Line, "link %q: cannot read %s", t, target)
		return
	}
	for _, h := range tp.Headings {
		if h.Slug == anchor {
			return
		}
	}
	c.report(p.Path, l.Line, "link %q: %s has no heading with the anchor #%s%s", t, target, anchor, nearest(anchor, tp))
}

var lineAnchorRE = regexp.MustCompile(`^L\d+(-L\d+)?$`)

// nearest names the page's anchors, to make a fix easy.
func nearest(anchor string, p *Page) string {
	var slugs []string
	for _, h := range p.Headings {
		slugs = append(slugs, "#"+h.Slug)
	}
	if len(slugs) > 12 {
		slugs = slugs[:12]
		slugs = append(slugs, "…")
	}
	return " (its anchors: " + strings.Join(slugs, " ") + ")"
}

// ourTops are the repository's own top-level folders: a path that starts
// with one of them is one of ours and must exist.
var ourTops = []string{"labs", "internal", "mycore", "mylib", "scripts", "hack", "docs", "yaml"}

// foreign are paths of other projects that look like ours: containerd's
// CRI plugin is internal/cri/ (2.x), upstream Kubernetes has
// hack/lib/version.sh — neither is ours.
var foreign = []string{"internal/cri/", "hack/lib/"}

// labDirRE: labs/x where x is no NN-name is not a path but a namespace
// and a name (pod labs/lab11-demo).
var labDirRE = regexp.MustCompile(`^labs/\d\d-`)

// pathRE finds a path of ours: at the start of a word (not inside another
// path such as /path/to/kubelet-labs/.labs/… or k8s.io/…/pkg/…).
var pathRE = regexp.MustCompile("(?:^|[\\s`(\"'=|\\[,>:])(?:\\./)?((?:" + strings.Join(ourTops, "|") + ")/[A-Za-z0-9._/-]*)")

func (c *checker) paths(p *Page, t Text) {
	for _, m := range pathRE.FindAllStringSubmatchIndex(t.Text, -1) {
		raw := t.Text[m[2]:m[3]]
		name := strings.TrimSuffix(raw, "/...")
		name = strings.TrimRight(name, "./")
		if name == "" || placeholder(t.Text[m[2]:]) || slices.ContainsFunc(foreign, func(f string) bool { return strings.HasPrefix(name+"/", f) }) ||
			strings.HasPrefix(name, "labs/") && !labDirRE.MatchString(name) {
			continue
		}
		c.stats.Paths++
		if _, ok := c.exists(name); ok {
			continue
		}
		line := t.Line + strings.Count(t.Text[:m[2]], "\n")
		if c.missing[fmt.Sprintf("%s:%d:%s", p.Path, line, name)] {
			continue
		}
		// a package and one of its names: mycore/node.Register
		if pkg, ident, ok := goName(name); ok {
			if isDir, ok := c.exists(pkg); !ok || !isDir {
				c.report(p.Path, line, "%s: package folder %s does not exist", name, pkg)
			} else if !c.declares(pkg, ident) {
				c.report(p.Path, line, "%s: package %s declares no %s", name, pkg, ident)
			}
			continue
		}
		c.report(p.Path, line, "%s does not exist", name)
	}
	// In a lab's README, a path into one of the lab's own folders
	// (teachloop/loop.go, plegview/view.go) is relative to the lab.
	if dir := path.Dir(p.Path); strings.HasPrefix(p.Path, "labs/") {
		for _, m := range localPathRE.FindAllStringSubmatchIndex(t.Text, -1) {
			name := t.Text[m[2]:m[3]]
			first, _, _ := strings.Cut(name, "/")
			if isDir, ok := c.exists(path.Join(dir, first)); !ok || !isDir {
				continue
			}
			c.stats.Paths++
			if _, ok := c.exists(path.Join(dir, strings.TrimRight(name, "./"))); !ok {
				c.report(p.Path, t.Line+strings.Count(t.Text[:m[2]], "\n"), "%s does not exist (in %s)", name, dir)
			}
		}
	}
}

var localPathRE = regexp.MustCompile("(?:^|[\\s`(\"'\\[])([a-z][a-z0-9_-]*/[A-Za-z0-9._/-]*[A-Za-z0-9_])")

// placeholder: a path written as a pattern (labs/NN-name, labs/*/README.md,
// labs/19-name in "how to add a lab"), not a file.
func placeholder(s string) bool {
	end := strings.IndexAny(s, " \t\n`)\"'")
	if end >= 0 {
		s = s[:end]
	}
	return strings.ContainsAny(s, "*<>{}$…") || strings.Contains(s, "NN") || exampleLabRE.MatchString(s)
}

var exampleLabRE = regexp.MustCompile(`\d\d-name(/|$)`)

// goCmdRE finds `go run`, `go test`, `go build`, `go vet` and what follows
// on the line.
var goCmdRE = regexp.MustCompile(`\bgo (run|test|build|vet)\b([^\n;&|]*)`)

// goTargets checks the packages and files a go command names.
func (c *checker) goTargets(p *Page, t Text) {
	for _, m := range goCmdRE.FindAllStringSubmatchIndex(t.Text, -1) {
		line := t.Line + strings.Count(t.Text[:m[0]], "\n")
		before := t.Text[strings.LastIndexByte(t.Text[:m[0]], '\n')+1 : m[0]]
		if strings.HasPrefix(strings.TrimSpace(before), "#") || strings.Contains(before, " #") {
			continue // in a shell comment
		}
		for _, arg := range strings.Fields(t.Text[m[4]:m[5]]) {
			arg = strings.TrimRight(strings.Trim(arg, "`\"'()"), ",;:") // the sentence's, not the path's
			if strings.HasPrefix(arg, "#") {
				break // a shell comment
			}
			isPath := strings.HasPrefix(arg, "./") || slices.ContainsFunc(ourTops, func(top string) bool { return strings.HasPrefix(arg, top+"/") })
			if !isPath || placeholder(arg) {
				continue
			}
			name := path.Clean(strings.TrimSuffix(strings.TrimSuffix(arg, "..."), "/"))
			c.stats.GoTargets++
			isDir, ok := c.exists(name)
			switch {
			case !ok:
				c.report(p.Path, line, "go %s %s: %s does not exist", t.Text[m[2]:m[3]], arg, name)
				c.missing[fmt.Sprintf("%s:%d:%s", p.Path, line, name)] = true
			case isDir && name != "." && !strings.HasSuffix(arg, "..."):
				if !c.hasGo(name) {
					c.report(p.Path, line, "go %s %s: %s has no Go files", t.Text[m[2]:m[3]], arg, name)
				}
			}
		}
	}
}

// goName splits pkg/path.Name (or pkg/path.Type.Method) into the
// package's folder and the first name.
func goName(s string) (pkg, ident string, ok bool) {
	slash := strings.LastIndexByte(s, '/')
	dot := strings.IndexByte(s[slash+1:], '.')
	if dot < 0 {
		return "", "", false
	}
	pkg, ident = s[:slash+1+dot], s[slash+1+dot+1:]
	ident, _, _ = strings.Cut(ident, ".")
	if !goIdentRE.MatchString(ident) {
		return "", "", false
	}
	return pkg, ident, true
}

var goIdentRE = regexp.MustCompile(`^[A-Z][A-Za-z0-9_]*$`)

// declares reports whether a package declares a top-level name (a func,
// type, var or const, alone or in a group) in its non-test files.
func (c *checker) declares(pkg, ident string) bool {
	decl := regexp.MustCompile(`(?m)^(?:func (?:\([^)]*\) )?|type |var |const |\t)` + ident + `\b`)
	entries, _ := fs.ReadDir(c.fsys, pkg)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		src, err := fs.ReadFile(c.fsys, path.Join(pkg, e.Name()))
		if err == nil && decl.Match(src) {
			return true
		}
	}
	return false
}

func (c *checker) hasGo(dir string) bool {
	entries, _ := fs.ReadDir(c.fsys, dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".go") {
			return true
		}
	}
	return false
}

// labNameRE finds a lab named by number and name (07-pleg), which must be
// the lab of that number.
var labNameRE = regexp.MustCompile(`(?:^|[^A-Za-z0-9./_-])(\d\d)-([a-z][a-z0-9]*(?:-[a-z][a-z0-9]*)*)`)

func (c *checker) labNames(p *Page, t Text) {
	labs := c.labs()
	for _, m := range labNameRE.FindAllStringSubmatchIndex(t.Text, -1) {
		num, name := t.Text[m[2]:m[3]], t.Text[m[2]:m[5]]
		want, ok := labs[num]
		if !ok {
			continue // not a lab's number
		}
		c.stats.LabNames++
		if name == want || strings.HasPrefix(want, name+"-") {
			continue // the lab (or the start of its name)
		}
		c.report(p.Path, t.Line+strings.Count(t.Text[:m[2]], "\n"), "lab %s is %s, not %s", num, want, name)
	}
}

// labs maps a lab's number to its folder's name.
func (c *checker) labs() map[string]string {
	labs := map[string]string{}
	entries, _ := fs.ReadDir(c.fsys, "labs")
	for _, e := range entries {
		if num, _, ok := strings.Cut(e.Name(), "-"); ok && e.IsDir() && len(num) == 2 {
			labs[num] = e.Name()
		}
	}
	return labs
}

// twin checks that an English page has its zh-CN twin, with as many
// headings and as many mermaid blocks.
func (c *checker) twin(p *Page) {
	if strings.HasSuffix(p.Path, ".zh-CN.md") {
		if _, ok := c.exists(strings.TrimSuffix(p.Path, ".zh-CN.md") + ".md"); !ok {
			c.report(p.Path, 0, "a zh-CN page without its English page %s", strings.TrimSuffix(p.Path, ".zh-CN.md")+".md")
		}
		return
	}
	zh := strings.TrimSuffix(p.Path, ".md") + ".zh-CN.md"
	c.stats.Twins++
	z := c.load(zh)
	if z == nil {
		c.report(p.Path, 0, "no zh-CN twin: %s does not exist", zh)
		return
	}
	if a, b := len(p.Headings), len(z.Headings); a != b {
		c.report(p.Path, 0, "%d headings, but %s has %d", a, zh, b)
	}
	if a, b := len(Mermaid(p)), len(Mermaid(z)); a != b {
		c.report(p.Path, 0, "%d mermaid blocks, but %s has %d", a, zh, b)
	}
}

// Mermaid returns a page's mermaid blocks.
func Mermaid(p *Page) []Fence {
	var out []Fence
	for _, f := range p.Fences {
		if f.Lang == "mermaid" {
			out = append(out, f)
		}
	}
	return out
}
