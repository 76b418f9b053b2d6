package coursecheck

import (
	"go/ast"
	"path/filepath"
	"strconv"
	"testing"

	"kubelet-labs/internal/testenv"
)

// TestEveryCRICallIsMetered: our kubelet's CRI calls are counted by one
// Meter, put in front of the runtime where a connection is made —
// cri.Dial and cri.InProcess (mycore/cri). A connection made anywhere
// else (the kubelet's remote client imported directly), or a cri.Client
// put together by hand, would go around it. mylib is left out: its fake
// node is the real kubelet, which dials the runtime itself.
func TestEveryCRICallIsMetered(t *testing.T) {
	srcs := testenv.GoSources(t, repoRoot(t), "labs", "internal", "mycore")
	if len(srcs) < 100 {
		t.Fatalf("read only %d files of labs, internal and mycore", len(srcs))
	}
	for _, src := range srcs {
		inCRI := filepath.Dir(src.Rel) == filepath.Join("mycore", "cri")
		criName := ""
		for _, imp := range src.File.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == "k8s.io/cri-client/pkg" && !inCRI {
				t.Errorf("%s:%d imports the kubelet's remote CRI client: connect with mycore/cri (Dial, InProcess), whose Meter counts every call", src.Rel, src.Line(imp.Pos()))
			}
			if p == "kubelet-labs/mycore/cri" {
				criName = "cri"
				if imp.Name != nil {
					criName = imp.Name.Name
				}
			}
		}
		if criName == "" {
			continue
		}
		ast.Inspect(src.File, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			if sel, ok := lit.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Client" {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == criName {
					t.Errorf("%s:%d builds a cri.Client by hand: its calls would pass no Meter; use cri.Dial or cri.InProcess", src.Rel, src.Line(lit.Pos()))
				}
			}
			return true
		})
	}
}
