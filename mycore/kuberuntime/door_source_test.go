package kuberuntime

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Only the door (door.go) reaches the runtime service: no other file of
// the package names cri-api's service interfaces, keeps a *cri.Client
// (New only hands its argument to the door) or selects a client's
// Runtime, Images or Context — so a CRI call that is not on the journal
// cannot be written.
func TestOnlyTheDoorReachesTheRuntime(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if f == "door.go" || strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		pkgs := map[string]bool{} // the file's import names: context.Context is no field
		for _, imp := range file.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == "k8s.io/cri-api/pkg/apis" || p == "k8s.io/cri-client/pkg" {
				t.Errorf("%s imports %s: only door.go may hold a runtime service", fset.Position(imp.Pos()), p)
			}
			name := filepath.Base(p)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			pkgs[name] = true
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && pkgs[x.Name] {
					// New takes a *cri.Client to hand to the door; nothing
					// else of the package may keep one.
					if x.Name == "cri" && sel.Sel.Name == "Client" && f != "manager.go" {
						t.Errorf("%s: a *cri.Client outside the door (door.go)", fset.Position(sel.Pos()))
					}
					return true
				}
				switch sel.Sel.Name {
				case "Runtime", "Images", "Context":
					t.Errorf("%s: .%s reaches around the door (door.go): call the runtime through m.cri", fset.Position(sel.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
	}
}
