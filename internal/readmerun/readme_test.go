package readmerun

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"kubelet-labs/internal/critest"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
)

// LabsEnvVar narrows TestLabREADMEs to some labs ("07" or "07,12"); lab
// 00's README always runs first, since every other lab needs its cluster.
const LabsEnvVar = "LABS_README"

// TestLabREADMEs runs every lab's README as a learner would: in a fresh
// copy of the repository, lab 00 in the background, then each lab's blocks
// in order, comparing the output each README shows. The zh-CN README must
// carry the same blocks.
func TestLabREADMEs(t *testing.T) {
	root, binDir := testenv.Binaries(t)
	readmes, err := filepath.Glob(filepath.Join(root, "labs", "*", "README.md"))
	if err != nil || len(readmes) < 19 {
		t.Fatalf("found %d lab READMEs (%v)", len(readmes), err)
	}
	slices.Sort(readmes)
	only := strings.Split(os.Getenv(LabsEnvVar), ",")
	wanted := func(lab string) bool {
		if os.Getenv(LabsEnvVar) == "" || strings.HasPrefix(lab, "00-") {
			return true
		}
		for _, o := range only {
			if o != "" && strings.HasPrefix(lab, strings.TrimSpace(o)) {
				return true
			}
		}
		return false
	}

	// The labs on containerd need the course's containerd, which root
	// starts (the one command of the course that needs root).
	var containerdDir string
	if env, err := labruntime.Load(); err == nil && env.File != "" {
		containerdDir = filepath.Dir(env.File)
	}
	s := NewSession(t, root, binDir, containerdDir)
	defer s.Close(t)
	for _, readme := range readmes {
		lab := filepath.Base(filepath.Dir(readme))
		if !wanted(lab) {
			continue
		}
		blocks := parseFile(t, readme)
		zh := parseFile(t, strings.TrimSuffix(readme, ".md")+".zh-CN.md")
		if err := SameBlocks(blocks, zh); err != nil {
			t.Errorf("labs/%s/README.zh-CN.md: %v", lab, err)
		}
		if onContainerd[lab[:2]] && containerdDir == "" {
			d, _ := state.Path("containerd")
			critest.Require(t, false, "labs/%s/README.md runs labs on containerd, and none runs (%s has no env): start it with sudo scripts/containerd-up.sh", lab, d)
			continue
		}
		if !t.Run(lab, func(t *testing.T) { s.Run(t, blocks) }) && strings.HasPrefix(lab, "00-") {
			t.Fatal("lab 00's README failed: every other lab needs its cluster")
		}
	}
}

func parseFile(t *testing.T, path string) []Block {
	t.Helper()
	md, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := Parse(md)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return blocks
}

// onContainerd are the labs whose READMEs run pods on the course's
// containerd.
var onContainerd = map[string]bool{"11": true, "12": true, "14": true, "15": true, "16": true, "17": true, "18": true}
