package main

import (
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os/exec"
	"sort"
	"strconv"
	"strings"
)

// markerPrefix starts the directive that marks a function as part of a
// stage: //stage:NAME as the last line of its doc comment. A directive
// (no space after //) is not shown as documentation (go/doc, Go 1.19+).
const markerPrefix = "//stage:"

// markedFuncs returns the functions of src marked for stage name, in the
// file's order.
func markedFuncs(filename string, src []byte, name string) ([]*ast.FuncDecl, error) {
	f, err := parser.ParseFile(token.NewFileSet(), filename, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	return marked(f, name), nil
}

func marked(f *ast.File, name string) []*ast.FuncDecl {
	var out []*ast.FuncDecl
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Doc == nil || fn.Body == nil {
			continue
		}
		for _, c := range fn.Doc.List {
			if strings.TrimSpace(c.Text) == markerPrefix+name {
				out = append(out, fn)
			}
		}
	}
	return out
}

// edit replaces src[from:to] with text.
type edit struct {
	from, to int
	text     string
}

// makeStub returns the learner's starting file: src with the body of
// every function marked for the stage replaced by a bare return (unnamed
// results are named _ so the bare return compiles), and the imports that
// only those bodies used dropped. packageNames maps an import path to its
// package name (go list knows; see listPackageNames).
func makeStub(s Stage, src []byte, packageNames func(paths []string) (map[string]string, error)) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, s.File, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	funcs := marked(f, s.Name)
	if len(funcs) == 0 {
		return nil, fmt.Errorf("%s has no function marked %s%s", s.File, markerPrefix, s.Name)
	}
	off := func(p token.Pos) int { return fset.Position(p).Offset }
	var edits []edit
	for _, fn := range funcs {
		if res := fn.Type.Results; res != nil {
			for _, field := range res.List {
				if len(field.Names) > 0 {
					continue
				}
				if res.Opening.IsValid() {
					edits = append(edits, edit{off(field.Type.Pos()), off(field.Type.Pos()), "_ "})
				} else { // func f() T: a single unnamed result, no parentheses
					edits = append(edits, edit{off(field.Type.Pos()), off(field.Type.Pos()), "(_ "}, edit{off(field.Type.End()), off(field.Type.End()), ")"})
				}
			}
		}
		body := fmt.Sprintf("{\n\t// stage %s: yours to write. The comment above says what it must do;\n\t// make grade NAME=%s says how far you are.\n\treturn\n}", s.Name, s.Name)
		edits = append(edits, edit{off(fn.Body.Lbrace), off(fn.Body.Rbrace) + 1, body})
	}
	// a header after the package clause says what this file is
	header := fmt.Sprintf("\n\n// Your copy of %s for stage %s (make stage NAME=%[2]s).\n// make grade NAME=%[2]s builds the package with this file in place of\n// the reference; the reference itself is not changed.", s.File, s.Name)
	edits = append(edits, edit{off(f.Name.End()), off(f.Name.End()), header})
	out := apply(src, edits)
	out, err = dropUnusedImports(s.File, out, packageNames)
	if err != nil {
		return nil, err
	}
	return format.Source(out)
}

func apply(src []byte, edits []edit) []byte {
	sort.SliceStable(edits, func(i, j int) bool { return edits[i].from > edits[j].from })
	out := append([]byte(nil), src...)
	for _, e := range edits {
		out = append(out[:e.from:e.from], append([]byte(e.text), out[e.to:]...)...)
	}
	return out
}

// dropUnusedImports removes the imports no identifier of src refers to
// any more (go would refuse to compile the stub otherwise). Blank and dot
// imports are kept: they are there for their side effects or names.
func dropUnusedImports(filename string, src []byte, packageNames func([]string) (map[string]string, error)) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filename, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("the stub does not parse: %w", err)
	}
	var paths []string
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		paths = append(paths, p)
	}
	if len(paths) == 0 {
		return src, nil
	}
	names, err := packageNames(paths)
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				used[id.Name] = true
			}
		}
		return true
	})
	var edits []edit
	for _, gd := range f.Decls {
		d, ok := gd.(*ast.GenDecl)
		if !ok || d.Tok != token.IMPORT {
			continue
		}
		for _, spec := range d.Specs {
			imp := spec.(*ast.ImportSpec)
			p, _ := strconv.Unquote(imp.Path.Value)
			name := names[p]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			if name == "_" || name == "." || used[name] {
				continue
			}
			if name == "" {
				return nil, fmt.Errorf("the package name of import %q is unknown", p)
			}
			from, to := fset.Position(imp.Pos()).Offset, fset.Position(imp.End()).Offset
			if d.Lparen.IsValid() {
				edits = append(edits, edit{from, to, ""})
			} else { // import "x": the whole declaration goes
				edits = append(edits, edit{fset.Position(d.Pos()).Offset, fset.Position(d.End()).Offset, ""})
			}
		}
	}
	return apply(src, edits), nil
}

// listPackageNames asks go list for the package names of paths, as seen
// from the module in root (an import's last element is not always its
// name: k8s.io/api/core/v1 is v1, cri-api's is v1 too).
func listPackageNames(ctx context.Context, root string) func([]string) (map[string]string, error) {
	return func(paths []string) (map[string]string, error) {
		cmd := exec.CommandContext(ctx, "go", append([]string{"list", "-f", "{{.ImportPath}} {{.Name}}"}, paths...)...)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go list %s: %v: %s", strings.Join(paths, " "), err, strings.TrimSpace(stderr.String()))
		}
		names := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if p, n, ok := strings.Cut(line, " "); ok {
				names[p] = n
			}
		}
		return names, nil
	}
}
