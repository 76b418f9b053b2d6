// Package harness runs upstream's node conformance e2e tests (v1.36.3)
// against one of the course's nodes: it builds what the run needs (the e2e
// binary, the ginkgo CLI, kube-scheduler, the test images, the node), starts
// a control plane of its own (internal/controlplane, on free ports, in its
// own folder, so a running lab 00 is left alone), a scheduler and the node,
// runs the selected specs with ginkgo in parallel, reads ginkgo's JSON
// report, and stops everything it started. `make conformance` and the CI
// slice (hack/conformance's TestConformanceSlice) both use it.
package harness

import (
	"fmt"
	"os"
	"path/filepath"

	"kubelet-labs/internal/state"
)

// Layout is where a run keeps what it builds and writes, all in the
// state folder (<state>/conformance/...), so a second run reuses the builds
// and `make clean` removes everything.
type Layout struct {
	// Repo is the repository root; Module is hack/conformance in it.
	Repo, Module string
	// Dir is <state>/conformance.
	Dir string
	// BinDir holds the built programs, ImageDir the image tars (both cached
	// across runs), ControlPlaneBinDir lab 00's control plane binaries
	// (<state>/bin, shared with the labs).
	BinDir, ImageDir, ControlPlaneBinDir string
}

// NewLayout finds the repository and makes the state folders.
func NewLayout() (*Layout, error) {
	repo, err := state.Root()
	if err != nil {
		return nil, err
	}
	dir, err := state.Ensure("conformance")
	if err != nil {
		return nil, err
	}
	cpBin, err := state.Ensure("bin")
	if err != nil {
		return nil, err
	}
	l := &Layout{
		Repo: repo, Module: filepath.Join(repo, "hack", "conformance"), Dir: dir,
		BinDir: filepath.Join(dir, "bin"), ImageDir: filepath.Join(dir, "images"), ControlPlaneBinDir: cpBin,
	}
	if _, err := os.Stat(filepath.Join(l.Module, "go.mod")); err != nil {
		return nil, fmt.Errorf("hack/conformance/go.mod not found in %s: %w", repo, err)
	}
	return l, nil
}
