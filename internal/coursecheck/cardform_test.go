package coursecheck

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestEveryLabBuildsFromItsMainGo: `go run labs/NN-name/main.go` (the form
// the course is announced with, and the one the course it replaces used)
// compiles main.go alone, so a lab's main.go may use only its imports,
// never another file of its folder. go vet ./... cannot see this: it builds
// whole folders.
func TestEveryLabBuildsFromItsMainGo(t *testing.T) {
	mains, err := filepath.Glob("../../labs/*/main.go")
	if err != nil || len(mains) < 19 {
		t.Fatalf("found %d labs (%v): want every lab, 00-18", len(mains), err)
	}
	out := t.TempDir()
	for _, main := range mains {
		lab := filepath.Base(filepath.Dir(main))
		t.Run(lab, func(t *testing.T) {
			cmd := exec.Command("go", "build", "-o", filepath.Join(out, lab), filepath.Join("labs", lab, "main.go"))
			cmd.Dir = "../.."
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("go build labs/%s/main.go (what `go run labs/%s/main.go` compiles): %v\n%s", lab, lab, err, b)
			}
		})
	}
}
