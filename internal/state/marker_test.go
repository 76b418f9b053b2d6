package state

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A folder the labs make gets the marker; one they find empty too; one that
// holds someone else's files is refused and left as it was.
func TestEnsureClaimsOnlyFoldersItMakesOrFindsEmpty(t *testing.T) {
	base := t.TempDir()

	made := filepath.Join(base, "new")
	t.Setenv(EnvVar, made)
	if _, err := Ensure("cluster"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(made, Marker)); err != nil {
		t.Errorf("a folder Ensure made has no %s: %v", Marker, err)
	}

	empty := filepath.Join(base, "empty")
	os.Mkdir(empty, 0o700)
	t.Setenv(EnvVar, empty)
	if _, err := Ensure(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(empty, Marker)); err != nil {
		t.Errorf("an empty folder Ensure took has no %s: %v", Marker, err)
	}

	home := filepath.Join(base, "home") // LABS_STATE_DIR=$HOME, by mistake
	os.Mkdir(home, 0o700)
	os.WriteFile(filepath.Join(home, "thesis.tex"), []byte("years of work"), 0o600)
	t.Setenv(EnvVar, home)
	_, err := Ensure("cluster")
	if err == nil || !strings.Contains(err.Error(), "not empty") || !strings.Contains(err.Error(), Marker) {
		t.Errorf("Ensure in a folder of someone's files: %v, want a refusal naming %s", err, Marker)
	}
	if entries, _ := os.ReadDir(home); len(entries) != 1 {
		t.Errorf("the refused folder was changed: %v", entries)
	}

	// a marker that is not a plain file (a symlink someone planted) is refused
	planted := filepath.Join(base, "planted")
	os.Mkdir(planted, 0o700)
	os.Symlink(filepath.Join(base, "elsewhere"), filepath.Join(planted, Marker))
	t.Setenv(EnvVar, planted)
	if _, err := Ensure(); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Ensure with a symlink for a marker: %v, want a refusal", err)
	}
}

// Two labs started at once on a new state folder (the exercise of lab 02
// runs two nodes side by side) both claim it: neither may take the other's
// marker or probe file for someone else's files.
func TestEnsureConcurrentClaimsOfANewFolderAllSucceed(t *testing.T) {
	for round := range 20 {
		t.Setenv(EnvVar, filepath.Join(t.TempDir(), "new"))
		errs := make(chan error, 8)
		for range cap(errs) {
			go func() { _, err := Ensure(); errs <- err }()
		}
		for range cap(errs) {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: Ensure beside other claimants of a new folder: %v", round, err)
			}
		}
	}
}
