package state

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDirDefaultsToDotLabsAtTheRepoRoot(t *testing.T) {
	t.Setenv(EnvVar, "")
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("root %s has no go.mod", root)
	}
	d, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	if d != filepath.Join(root, ".labs") {
		t.Errorf("Dir() = %s, want %s/.labs", d, root)
	}
}

func TestEnvVarOverridesAndEnsureChecksWritability(t *testing.T) {
	base := t.TempDir()
	t.Setenv(EnvVar, filepath.Join(base, "state"))
	p, err := Ensure("nodes", "n1")
	if err != nil {
		t.Fatal(err)
	}
	if p != filepath.Join(base, "state", "nodes", "n1") {
		t.Errorf("Ensure = %s", p)
	}
	if info, err := os.Stat(p); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("folder mode: %v %v", info, err)
	}

	// A path under a regular file can never be created, even as root.
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o600)
	t.Setenv(EnvVar, filepath.Join(file, "state"))
	_, err = Ensure()
	if err == nil || !strings.Contains(err.Error(), EnvVar) {
		t.Errorf("Ensure under a file: %v, want an error naming %s", err, EnvVar)
	}
}
