package labnames

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// pending are copies another change in flight removes (issue 40): the
// file, and the name it still spells out. The test fails once the copy is
// gone, so the entry cannot outlive it.
var pending = map[string]string{}

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
	seen := map[string]bool{}
	for _, top := range []string{"labs", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			if d.IsDir() && (rel == "internal/labnames" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			for _, lit := range stringLiterals(t, path) {
				name, ok := names[lit.value]
				if !ok {
					continue
				}
				if pending[rel] == lit.value {
					seen[rel] = true
					continue
				}
				t.Errorf("%s:%d spells out %q: use labnames.%s (internal/labnames), which the lab and its self-check share", rel, lit.line, lit.value, name)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for file, name := range pending {
		if !seen[file] {
			t.Errorf("%s no longer spells out %q: remove it from pending", file, name)
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

func stringLiterals(t *testing.T, path string) []literal {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []literal
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil {
				out = append(out, literal{s, fset.Position(lit.Pos()).Line})
			}
		}
		return true
	})
	return out
}
