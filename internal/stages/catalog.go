package main

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Stage is one entry of the catalog: catalog/NN-NAME.json, NN being the
// lab it belongs to (the files sort in the course's order).
type Stage struct {
	// Name is what `make stage NAME=…` takes, e.g. "pleg-relist".
	Name string `json:"name"`
	// Lab is the lab folder the stage belongs to, e.g. "07-pleg".
	Lab string `json:"lab"`
	// Title says in a few words what the learner writes.
	Title string `json:"title"`
	// File is the stage file, relative to the repository root: our
	// reference, holding only the functions marked //stage:Name (and
	// private helpers only they use).
	File string `json:"file"`
	// Package is the grader's package, e.g. "./mycore/plegruntime".
	Package string `json:"package"`
	// Tests is the grader: go test's -run pattern within Package.
	Tests string `json:"tests"`
	// Upstream names what the stage mirrors: file:line at v1.36.3.
	Upstream []string `json:"upstream"`
	// Hints are shown one more after each failed grade, then the
	// solution's place (the reference itself).
	Hints []string `json:"hints"`
	// RunArgs are the flags the lab needs to run the stage's code rather
	// than upstream's (lab 02 renews with upstream's lease controller
	// unless told --lease-renewer=ours).
	RunArgs []string `json:"run_args,omitempty"`
}

// runCommand is how the learner runs the stage's lab on their file.
func (s Stage) runCommand(overlay string) string {
	return strings.TrimSpace("go run -overlay " + overlay + " ./labs/" + s.Lab + " " + strings.Join(s.RunArgs, " "))
}

//go:embed catalog
var catalogFiles embed.FS

var (
	stageName = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)
	labFolder = regexp.MustCompile(`^[0-9]{2}-[a-z0-9-]+$`)
)

// loadCatalog reads and checks every stage of the catalog, in the
// course's order.
func loadCatalog() ([]Stage, error) {
	return parseCatalog(catalogFiles)
}

func parseCatalog(fsys fs.FS) ([]Stage, error) {
	names, err := fs.Glob(fsys, "catalog/*.json")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var stages []Stage
	seen := map[string]string{}
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		var s Stage
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if err := s.check(filepath.Base(name)); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if other, dup := seen[s.Name]; dup {
			return nil, fmt.Errorf("%s: stage %q is also %s", name, s.Name, other)
		}
		seen[s.Name] = name
		stages = append(stages, s)
	}
	if len(stages) == 0 {
		return nil, fmt.Errorf("the stages' catalog is empty (internal/stages/catalog/*.json)")
	}
	return stages, nil
}

// check says what is wrong with an entry on its own (checkInRepo looks at
// the files it names).
func (s Stage) check(base string) error {
	switch {
	case !stageName.MatchString(s.Name):
		return fmt.Errorf("name %q: want lower-case words joined by -", s.Name)
	case base != s.Lab[:min(2, len(s.Lab))]+"-"+s.Name+".json":
		return fmt.Errorf("file name: want %.2s-%s.json (the lab's number, then the stage's name)", s.Lab, s.Name)
	case !labFolder.MatchString(s.Lab):
		return fmt.Errorf("lab %q: want a lab folder like 07-pleg", s.Lab)
	case s.Title == "":
		return fmt.Errorf("no title")
	case !strings.HasSuffix(s.File, ".go") || strings.HasSuffix(s.File, "_test.go") || filepath.IsAbs(s.File) || strings.Contains(s.File, ".."):
		return fmt.Errorf("file %q: want a non-test .go file inside the repository", s.File)
	case !strings.HasPrefix(s.Package, "./") || "./"+filepath.Dir(s.File) != s.Package:
		return fmt.Errorf("package %q: want the stage file's own package, ./%s", s.Package, filepath.Dir(s.File))
	case s.Tests == "":
		return fmt.Errorf("no tests")
	case len(s.Upstream) == 0:
		return fmt.Errorf("no upstream reference")
	case len(s.Hints) == 0:
		return fmt.Errorf("no hints")
	}
	if _, err := regexp.Compile(s.Tests); err != nil {
		return fmt.Errorf("tests: %w", err)
	}
	return nil
}

// checkInRepo checks what the entry names exists in the checkout: the lab
// and the stage file, with at least one function marked for this stage.
func (s Stage) checkInRepo(root string) error {
	if fi, err := os.Stat(filepath.Join(root, "labs", s.Lab)); err != nil || !fi.IsDir() {
		return fmt.Errorf("stage %s: no lab folder labs/%s", s.Name, s.Lab)
	}
	src, err := os.ReadFile(filepath.Join(root, s.File))
	if err != nil {
		return fmt.Errorf("stage %s: %w", s.Name, err)
	}
	funcs, err := markedFuncs(s.File, src, s.Name)
	if err != nil {
		return fmt.Errorf("stage %s: %w", s.Name, err)
	}
	if len(funcs) == 0 {
		return fmt.Errorf("stage %s: %s has no function marked %s%s", s.Name, s.File, markerPrefix, s.Name)
	}
	return nil
}

// find returns the stage called name, or an error that lists them all.
func find(stages []Stage, name string) (Stage, error) {
	for _, s := range stages {
		if s.Name == name {
			return s, nil
		}
	}
	var names []string
	for _, s := range stages {
		names = append(names, s.Name)
	}
	return Stage{}, fmt.Errorf("no stage %q (stages: %s)", name, strings.Join(names, ", "))
}
