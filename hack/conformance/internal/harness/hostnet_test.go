package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// As root, a full cluster runs only what no other user could have written:
// a file of another user, or one others may write, anywhere in the trees
// refuses the run, naming it; the skipped folders are not looked at.
func TestRootOnlyRefusesWhatOthersCouldHaveWritten(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("root only: it checks what root would run")
	}
	base, err := os.MkdirTemp("/var/tmp", "rootonly-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	os.Chmod(base, 0o755)
	tree := filepath.Join(base, "checkout")
	skipped := filepath.Join(tree, ".labs")
	for _, d := range []string{filepath.Join(tree, "labs"), filepath.Join(skipped, "runs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	prog := filepath.Join(tree, "labs", "main.go")
	if err := os.WriteFile(prog, []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// a pod's volume file of another user, in the skipped state folder
	vol := filepath.Join(skipped, "runs", "token")
	if err := os.WriteFile(vol, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(vol, 0o666)
	os.Chown(vol, 1000, 1000)
	if err := rootOnly([]string{tree}, []string{skipped}); err != nil {
		t.Fatalf("a tree root owns: %v", err)
	}
	os.Chown(prog, 1000, 1000)
	if err := rootOnly([]string{tree}, []string{skipped}); err == nil || !strings.Contains(err.Error(), prog) {
		t.Errorf("a file of uid 1000 in the checkout: %v, want a refusal naming it", err)
	}
	os.Chown(prog, 0, 0)
	os.Chmod(filepath.Join(tree, "labs"), 0o777)
	if err := rootOnly([]string{tree}, []string{skipped}); err == nil || !strings.Contains(err.Error(), "labs") {
		t.Errorf("a folder anyone may write: %v, want a refusal naming it", err)
	}
	os.Chmod(filepath.Join(tree, "labs"), 0o755)
	os.Chmod(base, 0o777)
	if err := rootOnly([]string{tree}, []string{skipped}); err == nil || !strings.Contains(err.Error(), base) {
		t.Errorf("a folder above the checkout anyone may write: %v, want a refusal naming it", err)
	}
}
