package coursecheck

import (
	"go/ast"
	"go/token"
	"regexp"
	"strconv"
	"testing"

	"kubelet-labs/internal/testenv"
)

// courseCommand matches what only this course has: a lab's command, the
// boot script, a script of scripts/, a lab's folder or number ("lab 03").
// mycore and mylib are libraries any kubelet-shaped program could use; the
// advice that names such a command belongs to the lab or internal/ code
// that calls them.
var courseCommand = regexp.MustCompile(`go run \./labs|\./boot\.sh|scripts/[\w-]+\.sh|labs/\d\d-|\b[Ll]ab \d\d\b`)

// TestLibrariesNameNoCourseCommand: no string of mycore or mylib (what a
// learner may see in a message) names a command or folder of the course.
func TestLibrariesNameNoCourseCommand(t *testing.T) {
	srcs := testenv.GoSources(t, repoRoot(t), "mycore", "mylib")
	if len(srcs) < 50 {
		t.Fatalf("read only %d files of mycore and mylib", len(srcs))
	}
	for _, src := range srcs {
		ast.Inspect(src.File, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(lit.Value); err == nil && courseCommand.MatchString(s) {
				t.Errorf("%s:%d: %q names the course's %q: a library knows no command of the course; let its caller in internal/ or labs/ give that advice",
					src.Rel, src.Line(lit.Pos()), s, courseCommand.FindString(s))
			}
			return true
		})
	}
}
