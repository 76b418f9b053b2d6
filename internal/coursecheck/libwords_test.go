package coursecheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// courseCommand matches what only this course has: a lab's command, the
// boot script, a script of scripts/, a lab's folder. mycore and mylib are
// libraries any kubelet-shaped program could use; the advice that names
// such a command belongs to the lab or internal/ code that calls them.
var courseCommand = regexp.MustCompile(`go run \./labs|\./boot\.sh|scripts/[\w-]+\.sh|labs/\d\d-`)

// knownCourseWords are the strings still waiting for their caller to take
// the advice over, each with what is in the way. Remove an entry when it
// is fixed; never add one.
var knownCourseWords = map[string]string{}

// TestLibrariesNameNoCourseCommand: no string of mycore or mylib (what a
// learner may see in a message) names a command or folder of the course.
func TestLibrariesNameNoCourseCommand(t *testing.T) {
	root := repoRoot(t)
	files := 0
	stillThere := map[string]bool{}
	for _, dir := range []string{"mycore", "mylib"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			files++
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil || !courseCommand.MatchString(s) {
					return true
				}
				if _, known := knownCourseWords[rel]; known {
					stillThere[rel] = true
					return true
				}
				t.Errorf("%s:%d: %q names the course's %q: a library knows no command of the course; let its caller in internal/ or labs/ give that advice",
					rel, fset.Position(lit.Pos()).Line, s, courseCommand.FindString(s))
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for rel := range knownCourseWords {
		if !stillThere[rel] {
			t.Errorf("%s names no course command any more: remove it from knownCourseWords", rel)
		}
	}
	if files < 50 {
		t.Fatalf("read only %d files of mycore and mylib", files)
	}
}
