package labenv

import (
	"go/ast"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"kubelet-labs/internal/testenv"
)

// TestKubeconfigFlagHasOneWording: every --kubeconfig a lab or a tool of
// the course registers has KubeconfigUsage as its help (lab 18 adds what
// it uses it for), so `--help` reads the same in every lab (there were
// seven wordings in eleven labs).
func TestKubeconfigFlagHasOneWording(t *testing.T) {
	found := 0
	for _, src := range testenv.GoSources(t, "../..", "labs", "internal") {
		ast.Inspect(src.File, func(n ast.Node) bool {
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
			if u, ok := usage.(*ast.SelectorExpr); !ok || u.Sel.Name != "KubeconfigUsage" {
				t.Errorf("%s:%d: --kubeconfig's help is its own: use labenv.KubeconfigUsage", src.Rel, src.Line(call.Pos()))
			}
			return true
		})
	}
	if found < 10 {
		t.Errorf("found %d --kubeconfig flags in labs/ and internal/: the test reads the code wrong", found)
	}
}
