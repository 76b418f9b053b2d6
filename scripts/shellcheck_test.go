package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Every script root runs, and make clean, is shellcheck-clean: quoting
// mistakes in a root script are how a path becomes a command.
func TestScriptsPassShellcheck(t *testing.T) {
	shellcheck, err := exec.LookPath("shellcheck")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("shellcheck is not installed (apt-get install shellcheck); CI must have it")
		}
		t.Skip("shellcheck not installed: apt-get install shellcheck")
	}
	// from the repository root, where the scripts' `# shellcheck source=`
	// directives are relative to
	scripts, _ := filepath.Glob("*.sh")
	more, _ := filepath.Glob("containerd/*.sh")
	scripts = append(scripts, more...)
	for i, s := range scripts {
		scripts[i] = filepath.Join("scripts", s)
	}
	if len(scripts) < 6 {
		t.Fatalf("found only %v", scripts)
	}
	// hack/vmtest/run.sh runs as root too (make vm-test); the scripts it
	// puts in the VM without a warning
	vm, _ := filepath.Glob("../hack/vmtest/*.sh")
	if len(vm) < 4 {
		t.Fatalf("found only %v in hack/vmtest", vm)
	}
	for i, s := range vm {
		vm[i] = strings.TrimPrefix(s, "../")
	}
	for _, args := range [][]string{
		append(append([]string{"-x"}, scripts...), "hack/vmtest/run.sh"),
		append([]string{"-x", "-S", "warning"}, vm...),
	} {
		cmd := exec.Command(shellcheck, args...)
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("shellcheck %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
