package coursecheck

import (
	"os/exec"
	"strings"
	"testing"
)

// layer of a package of this module: labs 3, internal 2, mycore 1, mylib 0.
func layer(pkg string) (int, bool) {
	rest, ok := strings.CutPrefix(pkg, "kubelet-labs/")
	if !ok {
		return 0, false
	}
	top, _, _ := strings.Cut(rest, "/")
	switch top {
	case "labs":
		return 3, true
	case "internal":
		return 2, true
	case "mycore":
		return 1, true
	case "mylib":
		return 0, true
	}
	return 0, false
}

// testHarness are the internal packages a test of a lower layer may use:
// they start the real parts (a control plane, our containerd) a test of
// mycore runs against, and are never built into mycore or mylib themselves.
var testHarness = map[string]bool{
	"kubelet-labs/internal/testenv":      true,
	"kubelet-labs/internal/critest":      true,
	"kubelet-labs/internal/state":        true,
	"kubelet-labs/internal/controlplane": true,
}

// TestImportsGoDown: no package imports a package of a higher layer
// (labs → internal → mycore → mylib), and a test file of mycore or mylib
// imports from internal only the test harness.
func TestImportsGoDown(t *testing.T) {
	out, err := exec.Command("go", "list", "-f",
		"{{.ImportPath}}|{{join .Imports \" \"}}|{{join .TestImports \" \"}} {{join .XTestImports \" \"}}",
		"kubelet-labs/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		parts := strings.SplitN(line, "|", 3)
		pkg, imports, testImports := parts[0], strings.Fields(parts[1]), strings.Fields(parts[2])
		from, ok := layer(pkg)
		if !ok {
			continue
		}
		checked++
		for _, imp := range imports {
			if to, ok := layer(imp); ok && to > from {
				t.Errorf("%s imports %s: imports go down only (labs → internal → mycore → mylib)", pkg, imp)
			}
		}
		for _, imp := range testImports {
			to, ok := layer(imp)
			if !ok || to <= from || imp == pkg || (to == 2 && testHarness[imp]) {
				continue
			}
			t.Errorf("a test of %s imports %s: a test may reach up only to the harness (%s)", pkg, imp, strings.Join(harnessNames(), ", "))
		}
	}
	if checked < 40 {
		t.Fatalf("checked only %d packages: is go list seeing the module?", checked)
	}
}

func harnessNames() []string {
	var n []string
	for k := range testHarness {
		n = append(n, strings.TrimPrefix(k, "kubelet-labs/"))
	}
	return n
}
