package envcheck

import (
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// instanceName is the one name of the Lima instance everywhere: created
// with `limactl start --name=kubelet-labs vm.yaml`, then addressed as
// `limactl shell kubelet-labs`. Without --name, Lima names the instance
// after the file ("vm"), and every later command of the docs would miss it.
const instanceName = "kubelet-labs"

// limactlCommand finds `limactl SUBCOMMAND ARGS` up to the end of the line
// or of the inline code span.
var limactlCommand = regexp.MustCompile("limactl[ \t]+(start|shell|stop|delete|edit|restart|create)(?:[ \t]+([^`\n]*))?")

// TestOneInstanceName: every limactl command in the repository's Markdown
// files and in vm.yaml names the same instance. `limactl start … vm.yaml`
// (or create) must say --name=kubelet-labs; every other command that names
// an instance must name kubelet-labs ({{.Name}} in vm.yaml's message is
// Lima's own template for it).
func TestOneInstanceName(t *testing.T) {
	files := append(markdownFiles(t), "vm.yaml")
	seen := 0
	for _, rel := range files {
		text := string(readRepoFile(t, rel))
		for _, m := range limactlCommand.FindAllStringSubmatch(text, -1) {
			seen++
			if msg := checkLimactl(m[1], m[2]); msg != "" {
				t.Errorf("%s: `%s`: %s", rel, strings.TrimSpace(m[0]), msg)
			}
		}
	}
	if seen < 10 {
		t.Errorf("found only %d limactl commands in %v: is the pattern still right?", seen, files)
	}
}

// checkLimactl returns what is wrong with one limactl command, or "".
func checkLimactl(sub, rest string) string {
	args := strings.Fields(rest)
	if (sub == "start" || sub == "create") && containsFile(args, "vm.yaml") {
		for i, a := range args {
			if a == "--name="+instanceName || a == "--name" && i+1 < len(args) && args[i+1] == instanceName {
				return ""
			}
		}
		return "creates the VM without --name=" + instanceName + ": Lima would call it \"vm\", and `limactl shell " + instanceName + "` would not find it"
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") {
			continue
		}
		if a == instanceName || a == "{{.Name}}" {
			return ""
		}
		return "names instance " + a + ", want " + instanceName
	}
	return "" // no instance named (prose such as "`limactl start` waits …")
}

func containsFile(args []string, name string) bool {
	for _, a := range args {
		if a == name || strings.HasSuffix(a, "/"+name) {
			return true
		}
	}
	return false
}

// markdownFiles lists the repository's Markdown files (relative paths),
// leaving out the run-time state folder and vendored or hidden folders.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	root := repoRoot(t)
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "vendor" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("no Markdown files under %s", root)
	}
	return out
}

// TestLimactlCheckCatchesMismatches: the check above fails on the mistakes
// it exists for (a test that cannot fail proves nothing).
func TestLimactlCheckCatchesMismatches(t *testing.T) {
	for cmd, bad := range map[string]bool{
		"limactl start vm.yaml":                                      true,
		"limactl start --cpus=6 vm.yaml":                             true,
		"limactl start --name=vm vm.yaml":                            true,
		"limactl shell vm":                                           true,
		"limactl shell default":                                      true,
		"limactl stop kubelet":                                       true,
		"limactl start --name=kubelet-labs vm.yaml":                  false,
		"limactl start --name kubelet-labs --cpus=6 vm.yaml":         false,
		"limactl start --name=kubelet-labs --mount \"$PWD\" vm.yaml": false,
		"limactl start kubelet-labs":                                 false,
		"limactl shell kubelet-labs kubelet-labs-check":              false,
		"limactl edit kubelet-labs --memory=12":                      false,
		"limactl shell {{.Name}}":                                    false,
		"limactl start":                                              false,
	} {
		m := limactlCommand.FindStringSubmatch(cmd)
		if m == nil {
			t.Errorf("%q not recognised as a limactl command", cmd)
			continue
		}
		if got := checkLimactl(m[1], m[2]) != ""; got != bad {
			t.Errorf("%q: flagged=%v, want %v (%s)", cmd, got, bad, checkLimactl(m[1], m[2]))
		}
	}
}
