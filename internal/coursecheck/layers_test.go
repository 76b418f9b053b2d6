package coursecheck

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The layers, by folder: labs 3, internal 2, mycore 1, mylib 0. hack/ and
// scripts/ are tools (layer 4): they may use everything below them and
// nothing uses them, not even another tool, so a tool can change or go
// without a lab noticing. The one exception is hack/internal, the tools'
// own kit (the benchmarks' measuring, benchkit): the tools of hack/ may
// use it, nothing else may, and it uses no tool.
const toolLayer = 4

// hackKit is the tree of hack/internal: the tool tree its packages belong
// to, which every tool of hack/ may use.
const hackKit = "hack/internal"

var layerNames = map[int]string{0: "mylib", 1: "mycore", 2: "internal", 3: "labs", toolLayer: "hack/scripts"}

// layer of the repository folder rel (slash-separated, relative to the
// root); tool is the tree a tool package belongs to ("hack/conformance",
// "scripts"), "" for the others. ok is false for folders of no layer.
func layer(rel string) (l int, tool string, ok bool) {
	parts := strings.Split(rel, "/")
	switch parts[0] {
	case "labs":
		return 3, "", true
	case "internal":
		return 2, "", true
	case "mycore":
		return 1, "", true
	case "mylib":
		return 0, "", true
	case "scripts":
		return toolLayer, "scripts", true
	case "hack":
		if len(parts) > 1 {
			return toolLayer, "hack/" + parts[1], true
		}
		return toolLayer, "hack", true
	}
	return 0, "", false
}

// testHarness are the internal packages a test of mycore or mylib may
// reach: they start or find the real parts (a control plane, our
// containerd) such a test runs against, and are never built into mycore or
// mylib themselves. Everything they reach must be harness too, or of a
// lower layer: course plumbing (a lab's flags, its runtime opener) must not
// ride into a library's test through them.
var testHarness = map[string]bool{
	"internal/testenv":       true,
	"internal/critest":       true,
	"internal/containerdenv": true,
	"internal/state":         true,
	"internal/controlplane":  true,
}

// pkg is one entry of `go list -deps -test`: a package, a test variant of
// one ("p [q.test]") or a test's main ("p.test").
type pkg struct {
	rel     string   // folder relative to the repository's root, "" if outside it
	imports []string // entry IDs, as go list spells them
}

// TestImportsGoDown: nothing reaches, directly or through anything else, a
// package of a higher layer (labs → internal → mycore → mylib; hack/ and
// scripts/ on top, used by nothing); a test of mycore or mylib may in
// addition reach the test harness, and through it nothing else of internal.
// Every Go module of the repository is read, hack/'s nested ones included.
func TestImportsGoDown(t *testing.T) {
	root := repoRoot(t)
	modules := goModules(t, root)
	checked := 0
	seen := map[string]bool{} // a message is said once, whichever module listed it
	for _, mod := range modules {
		graph := list(t, root, mod)
		ids := make([]string, 0, len(graph))
		for id := range graph {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			p := graph[id]
			if p.rel == "" {
				continue
			}
			from, fromTool, ok := layer(p.rel)
			if !ok {
				continue
			}
			test := strings.HasSuffix(id, ".test")
			if !test && strings.Contains(id, " [") {
				continue // a test variant: checked from its test's main
			}
			if !test {
				checked++
			}
			for _, chain := range violations(graph, id, from, fromTool, test) {
				if msg := describe(graph, chain, from, test); !seen[msg] {
					seen[msg] = true
					t.Error(msg)
				}
			}
		}
	}
	if checked < 40 {
		t.Fatalf("checked only %d packages: is go list seeing the modules?", checked)
	}
}

// violations walks everything start reaches, breadth first so that each
// chain reported is a shortest one, and returns one chain (start first) per
// repository package it must not reach.
func violations(graph map[string]pkg, start string, from int, fromTool string, test bool) [][]string {
	parent := map[string]string{start: ""}
	queue := []string{start}
	var bad [][]string
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		for _, imp := range graph[id].imports {
			if _, done := parent[imp]; done {
				continue
			}
			parent[imp] = id
			queue = append(queue, imp)
			if !allowed(graph[imp].rel, from, fromTool, test) {
				var chain []string
				for c := imp; c != ""; c = parent[c] {
					chain = append([]string{c}, chain...)
				}
				bad = append(bad, chain)
			}
		}
	}
	return bad
}

// allowed says whether a package of layer from (in tool tree fromTool; its
// test, if test) may reach the package in folder rel.
func allowed(rel string, from int, fromTool string, test bool) bool {
	if rel == "" {
		return true // outside the repository: the standard library, a dependency
	}
	to, toTool, ok := layer(rel)
	if !ok {
		return true
	}
	if toTool != "" {
		if toTool == hackKit && strings.HasPrefix(fromTool, "hack/") {
			return true // the hack tools' kit, shared by them
		}
		return toTool == fromTool // a tool is used by its own tree only
	}
	if to <= from {
		return true
	}
	return test && from <= 1 && testHarness[rel]
}

// describe says what a learner needs to fix chain: who reaches what, and
// through which packages.
func describe(graph map[string]pkg, chain []string, from int, test bool) string {
	if test && len(chain) > 1 && graph[chain[1]].rel == graph[chain[0]].rel {
		chain = chain[1:] // a test's main, then its package: say the package once
	}
	names := make([]string, len(chain))
	for i, id := range chain {
		names[i] = display(graph, id)
	}
	last := graph[chain[len(chain)-1]].rel
	to, toTool, _ := layer(last)
	who := names[0]
	if test {
		who = "a test of " + strings.TrimSuffix(names[0], " (test)")
		names[0] = who
	}
	var rule string
	switch {
	case toTool != "":
		rule = "nothing uses a tool of hack/ or scripts/ but its own folder (hack/internal: the tools of hack/ only)"
	case test && from <= 1 && to == 2:
		rule = "a test of mycore or mylib may reach internal only through the test harness (" + strings.Join(harnessNames(), ", ") + "), and the harness only the harness"
	default:
		rule = "imports go down only (labs → internal → mycore → mylib)"
	}
	return who + " reaches " + last + " (" + layerNames[to] + ", above " + layerNames[from] + "): " +
		strings.Join(names, " → ") + "\n\t" + rule
}

// display names an entry by its folder: "mycore/cri (test)" for the main of
// mycore/cri's test, "internal/critest" for any variant of that package.
func display(graph map[string]pkg, id string) string {
	rel := graph[id].rel
	if rel == "" {
		rel, _, _ = strings.Cut(id, " [")
	}
	if strings.HasSuffix(id, ".test") {
		return rel + " (test)"
	}
	return rel
}

func harnessNames() []string {
	var n []string
	for k := range testHarness {
		n = append(n, k)
	}
	slices.Sort(n)
	return n
}

func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// goModules are the folders of the repository holding a go.mod: the course
// and the modules nested under hack/ and scripts/. The state folder and
// testdata hold none of ours.
func goModules(t *testing.T, root string) []string {
	t.Helper()
	var mods []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "go.mod" {
			mods = append(mods, filepath.Dir(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return mods
}

// list runs `go list -deps -test ./...` in module folder mod: every package
// of the module, its tests, and everything they import, transitively.
func list(t *testing.T, root, mod string) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-test", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .Imports \",\"}}", "./...")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list in %s: %v\n%s", mod, err, msg)
	}
	graph := map[string]pkg{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.SplitN(line, "\t", 3)
		if len(f) != 3 {
			t.Fatalf("go list in %s: unexpected line %q", mod, line)
		}
		var p pkg
		if rel, err := filepath.Rel(root, f[1]); err == nil && f[1] != "" && !strings.HasPrefix(rel, "..") {
			p.rel = filepath.ToSlash(rel)
		}
		if f[2] != "" {
			p.imports = strings.Split(f[2], ",") // an ID may hold a space: "p [q.test]"
		}
		graph[f[0]] = p
	}
	// a test's main is generated, in no folder: it stands for its package
	for id, p := range graph {
		if strings.HasSuffix(id, ".test") {
			p.rel = graph[strings.TrimSuffix(id, ".test")].rel
			graph[id] = p
		}
	}
	return graph
}

// TestLayerRules: the rules TestImportsGoDown applies, one case each, so a
// change to them is a visible decision.
func TestLayerRules(t *testing.T) {
	for _, c := range []struct {
		from, to string
		test     bool
		want     bool
	}{
		{"labs/01-fake-node", "internal/testenv", false, true},
		{"internal/labruntime", "mycore/cri", false, true},
		{"mycore/cri", "internal/labruntime", false, false},
		{"mylib/fakecri", "mycore/cri", false, false},
		{"mycore/cri", "internal/critest", true, true},           // the harness
		{"mycore/cri", "internal/labruntime", true, false},       // course plumbing, even in a test
		{"internal/readmerun", "labs/01-fake-node", true, false}, // the harness exception is for mycore and mylib
		{"hack/fleetbench", "labs/18-mykubelet", false, true},
		{"hack/conformance", "hack/conformance/internal/report", false, true},
		{"hack/conformance", "hack/fleetbench", false, false},
		{"internal/testenv", "hack/vmtest", true, false},
		{"scripts", "internal/critest", true, true},
		{"scripts", "hack/envcheck", true, false},
		{"labs/11-containerd", "scripts/kind", false, false},
	} {
		from, fromTool, _ := layer(c.from)
		if got := allowed(c.to, from, fromTool, c.test); got != c.want {
			t.Errorf("%s (test %v) may reach %s: %v, want %v", c.from, c.test, c.to, got, c.want)
		}
	}
}
