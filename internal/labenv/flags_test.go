package labenv

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

// kubeconfigPending are flags another change in flight gives the shared
// wording (issue 40); the test fails once it has, so the entry cannot
// outlive it.
var kubeconfigPending = map[string]bool{}

// TestKubeconfigFlagHasOneWording: every --kubeconfig a lab or a tool of
// the course registers has KubeconfigUsage as its help, so `--help` reads
// the same in every lab (there were seven wordings in eleven labs).
func TestKubeconfigFlagHasOneWording(t *testing.T) {
	root := "../.."
	found, pendingSeen := 0, map[string]bool{}
	for _, top := range []string{"labs", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) < 3 {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || !strings.HasPrefix(sel.Sel.Name, "String") {
					return true
				}
				// fs.StringVar(&p, "kubeconfig", def, usage) or fs.String("kubeconfig", def, usage)
				nameArg := call.Args[len(call.Args)-3]
				if lit, ok := nameArg.(*ast.BasicLit); !ok || lit.Value != strconv.Quote("kubeconfig") {
					return true
				}
				found++
				usage := call.Args[len(call.Args)-1]
				// KubeconfigUsage, or KubeconfigUsage + what the kubeconfig
				// is for in this lab (lab 18: the node's join)
				if b, ok := usage.(*ast.BinaryExpr); ok && b.Op == token.ADD {
					usage = b.X
				}
				if u, ok := usage.(*ast.SelectorExpr); ok && u.Sel.Name == "KubeconfigUsage" {
					return true
				}
				if kubeconfigPending[rel] {
					pendingSeen[rel] = true
					return true
				}
				t.Errorf("%s:%d: --kubeconfig's help is its own: use labenv.KubeconfigUsage", rel, fset.Position(call.Pos()).Line)
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if found < 10 {
		t.Errorf("found %d --kubeconfig flags in labs/ and internal/: the test reads the code wrong", found)
	}
	for file := range kubeconfigPending {
		if !pendingSeen[file] {
			t.Errorf("%s's --kubeconfig uses labenv.KubeconfigUsage now: remove it from kubeconfigPending", file)
		}
	}
}
