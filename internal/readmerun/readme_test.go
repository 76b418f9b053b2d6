package readmerun

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"kubelet-labs/internal/critest"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/testenv"
)

// LabsEnvVar narrows TestLabREADMEs to some labs ("07" or "07,12"); lab
// 00's README always runs first, since every other lab needs its cluster.
const LabsEnvVar = "LABS_README"

// ClusterEnvVar names an admin kubeconfig of a cluster the READMEs then run
// against instead of lab 00's (make kind-test: a kind cluster); lab 00's
// README is not run then, and the learner's terminal starts with
// KUBECONFIG set to a copy of it.
const ClusterEnvVar = "LABS_README_KUBECONFIG"

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
	cluster := os.Getenv(ClusterEnvVar)
	wanted := func(lab string) bool {
		if strings.HasPrefix(lab, "00-") {
			return cluster == ""
		}
		if os.Getenv(LabsEnvVar) == "" {
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
	// starts (the one command of the course that needs root): lab 11's
	// README types `sudo scripts/containerd-up.sh`, the labs after it use it.
	envFile, _ := labruntime.EnvFile()
	s := NewSession(t, root, binDir)
	defer s.Close(t)
	if cluster != "" {
		if err := s.UseCluster(cluster); err != nil {
			t.Fatalf("%s=%s: %v", ClusterEnvVar, cluster, err)
		}
		t.Logf("the READMEs run against the cluster of %s, not lab 00's", cluster)
	}
	for _, readme := range readmes {
		lab := filepath.Base(filepath.Dir(readme))
		if !wanted(lab) {
			continue
		}
		blocks, err := parseREADMEs(readme)
		if err != nil {
			t.Errorf("labs/%s: %v", lab, err) // TestREADMEsAreMarked says it too
			continue
		}
		if strings.HasPrefix(lab, "00-") {
			// lab 00 is the cluster every later README works against: the
			// learner leaves it running in its terminal, lab after lab
			for i := range blocks {
				blocks[i].Session = blocks[i].Session || blocks[i].Kind == Background
			}
		}
		if !t.Run(lab, func(t *testing.T) {
			// in the lab's own subtest: a skip here must not end the labs after it
			_, noContainerd := os.Stat(envFile)
			critest.Require(t, !onContainerd[lab[:2]] || noContainerd == nil, "labs/%s/README.md runs labs on containerd, and none runs (no %s): start it with sudo scripts/containerd-up.sh", lab, envFile)
			s.Run(t, blocks)
		}) && strings.HasPrefix(lab, "00-") {
			t.Fatal("lab 00's README failed: every other lab needs its cluster")
		}
	}
}

// parseREADMEs reads a lab's README and checks that its zh-CN README
// carries the same blocks.
func parseREADMEs(readme string) ([]Block, error) {
	blocks, err := parsePath(readme)
	if err != nil {
		return nil, err
	}
	zhPath := strings.TrimSuffix(readme, ".md") + ".zh-CN.md"
	zh, err := parsePath(zhPath)
	if err != nil {
		return nil, err
	}
	if err := SameBlocks(blocks, zh); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(zhPath), err)
	}
	return blocks, nil
}

func parsePath(path string) ([]Block, error) {
	md, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blocks, err := Parse(md)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return blocks, nil
}

// TestREADMEsAreMarked checks, in a second and without running anything,
// that every command block of every lab README is marked for the runner
// and that each zh-CN README carries the same blocks.
func TestREADMEsAreMarked(t *testing.T) {
	readmes, err := filepath.Glob("../../labs/*/README.md")
	if err != nil || len(readmes) < 19 {
		t.Fatalf("found %d lab READMEs (%v)", len(readmes), err)
	}
	total, run, outputs := 0, 0, 0
	for _, readme := range readmes {
		blocks, err := parseREADMEs(readme)
		if err != nil {
			t.Errorf("labs/%s: %v", filepath.Base(filepath.Dir(readme)), err)
			continue
		}
		for _, b := range blocks {
			total++
			if b.Kind != Skip {
				run++
			}
			if b.Output != nil {
				outputs++
			}
		}
	}
	t.Logf("%d lab READMEs: %d command blocks, %d of them run, %d output blocks compared", len(readmes), total, run, outputs)
}

// onContainerd are the labs whose READMEs run pods on the course's
// containerd, started before them: lab 11's README starts it (with sudo).
var onContainerd = map[string]bool{"12": true, "14": true, "15": true, "16": true, "17": true, "18": true}
