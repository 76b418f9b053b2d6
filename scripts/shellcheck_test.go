package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Every script root runs (containerd, the kind image and its tests, the
// VM test), and make clean, is shellcheck-clean: quoting mistakes in a
// root script are how a path becomes a command.
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
	for _, dir := range []string{"containerd/*.sh", "kind/*.sh"} {
		more, _ := filepath.Glob(dir)
		scripts = append(scripts, more...)
	}
	for i, s := range scripts {
		scripts[i] = filepath.Join("scripts", s)
	}
	if len(scripts) < 11 {
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
	// hack/kindtest's scripts run as root too (make kind-test, fleet-test),
	// and runc-in-bounds is what Docker runs for every container there
	kindtest, _ := filepath.Glob("../hack/kindtest/*.sh")
	if len(kindtest) < 3 {
		t.Fatalf("found only %v in hack/kindtest", kindtest)
	}
	for i, s := range kindtest {
		kindtest[i] = strings.TrimPrefix(s, "../")
	}
	for _, args := range [][]string{
		append(append(append([]string{"-x"}, scripts...), "hack/vmtest/run.sh"), kindtest...),
		append([]string{"-x", "-S", "warning"}, vm...),
		// installed into the kube-proxy and kindnetd images, run by busybox sh
		{"-s", "sh", "scripts/kind/iptables-wrapper"},
	} {
		cmd := exec.Command(shellcheck, args...)
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("shellcheck %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
