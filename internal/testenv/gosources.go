package testenv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// GoSource is one parsed non-test Go file of the repository.
type GoSource struct {
	Rel  string // its path from the repository's root, with slashes
	Fset *token.FileSet
	File *ast.File
}

// Line is the line of pos in the file.
func (s GoSource) Line(pos token.Pos) int { return s.Fset.Position(pos).Line }

// GoSources parses every non-test Go file below the folders tops of the
// repository at root (testdata folders left out), for the tests that read
// the course's code for a rule: a lab's help wording, a copied name, a
// course command in a library.
func GoSources(t testing.TB, root string, tops ...string) []GoSource {
	t.Helper()
	var out []GoSource
	for _, top := range tops {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			out = append(out, GoSource{Rel: filepath.ToSlash(rel), Fset: fset, File: f})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}
