package labnames

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"kubelet-labs/internal/testenv"
)

// TestNamesAreNotCopied: no lab and no self-check spells out a name this
// package holds — a copy is what let a lab's default and the self-check
// that looks for it drift apart. Tests may spell names out: they assert
// what the learner sees.
func TestNamesAreNotCopied(t *testing.T) {
	root := "../.."
	names := constants(t, "labnames.go")
	if len(names) < 10 {
		t.Fatalf("found %d names in labnames.go: the test reads it wrong", len(names))
	}
	for _, src := range testenv.GoSources(t, root, "labs", "internal") {
		if strings.HasPrefix(src.Rel, "internal/labnames/") {
			continue
		}
		for _, lit := range stringLiterals(src) {
			if name, ok := names[lit.value]; ok {
				t.Errorf("%s:%d spells out %q: use labnames.%s (internal/labnames), which the lab and its self-check share", src.Rel, lit.line, lit.value, name)
			}
		}
	}
}

// constants maps the value of each string constant of file to its name.
func constants(t *testing.T, file string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, v := range vs.Values {
				if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, _ := strconv.Unquote(lit.Value)
					out[s] = vs.Names[i].Name
				}
			}
		}
	}
	return out
}

type literal struct {
	value string
	line  int
}

func stringLiterals(src testenv.GoSource) []literal {
	var out []literal
	ast.Inspect(src.File, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil {
				out = append(out, literal{s, src.Line(lit.Pos())})
			}
		}
		return true
	})
	return out
}
