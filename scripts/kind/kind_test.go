package kind

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// run runs a script of this folder with args, as uid (0: as the test
// runs), and returns its combined output and exit code.
func run(t *testing.T, uid int, script string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command("./"+script, args...)
	if uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// Bad input gets one line that says what is wrong and what to type, and a
// non-zero exit, before anything is made or built.
func TestBadInputIsRefusedInOneLine(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the scripts run as root, and so must the test (CI does)")
	}
	notOurs := t.TempDir()
	os.WriteFile(filepath.Join(notOurs, "notes.txt"), []byte("someone's\n"), 0o644)
	for _, c := range []struct {
		uid    int
		script string
		args   []string
		want   string
	}{
		{0, "build-go.sh", nil, "error: no OUT given; usage: "},
		{0, "build-go.sh", []string{"/tmp/x", "--fast"}, "error: unknown option --fast; usage: "},
		{0, "build-go.sh", []string{"/tmp/x", "/tmp/y"}, "error: more than one OUT; usage: "},
		{65534, "build-go.sh", []string{"/tmp/x"}, "error: run as root (sudo "},
		{0, "build-go.sh", []string{notOurs}, "is not empty and was not made by build-go.sh"},
		{0, "component-images.sh", []string{notOurs}, "error: usage: "},
		{0, "component-images.sh", []string{notOurs, "/"}, "was not made by scripts/kind/build-go.sh (no .kubelet-labs-kind): run it first"},
		{0, "component-images.sh", []string{"--verify", notOurs}, "was not made by scripts/kind/build-go.sh"},
	} {
		out, code := run(t, c.uid, c.script, c.args...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code == 0 || len(lines) != 1 || !strings.Contains(out, c.want) {
			t.Errorf("%s %v (uid %d): exit %d, output:\n%s\nwant one line with %q and a non-zero exit", c.script, c.args, c.uid, code, out, c.want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(notOurs, "notes.txt")); string(b) != "someone's\n" {
		t.Errorf("a folder the scripts did not make was changed")
	}
	if entries, _ := os.ReadDir(notOurs); len(entries) != 1 {
		t.Errorf("the scripts wrote into a folder they did not make: %v", entries)
	}
}

// Root builds kindnetd from copies of the files build-go.sh names in
// KINDNETD_SOURCES, and nothing else of kindnetd/: the list must be the
// whole program (go.mod and every non-test .go file), the program must be
// ours (its own module, plain requirements: no replace or other directive
// could swap in other code), and its -version must say what build-go.sh
// expects, or root rebuilds it on every run.
func TestKindnetdSourcesAreTheBuiltOnes(t *testing.T) {
	script, err := os.ReadFile("build-go.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^KINDNETD_SOURCES=\(([^)]*)\)$`).FindStringSubmatch(string(script))
	if m == nil {
		t.Fatal("build-go.sh has no KINDNETD_SOURCES=(...) line")
	}
	listed := strings.Fields(m[1])
	want := []string{"go.mod"}
	goFiles, _ := filepath.Glob("kindnetd/*.go")
	for _, f := range goFiles {
		if !strings.HasSuffix(f, "_test.go") {
			want = append(want, filepath.Base(f))
		}
	}
	slices.Sort(listed)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Errorf("build-go.sh KINDNETD_SOURCES: %v\nkindnetd/ holds %v: root would build a different program than the tests test", listed, want)
	}
	if sub, _ := filepath.Glob("kindnetd/*/*.go"); len(sub) > 0 {
		t.Errorf("kindnetd/ has packages in subfolders %v: root builds only the top folder's files", sub)
	}

	gomod, err := os.ReadFile("kindnetd/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(gomod), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "module":
			if f[1] != "kubelet-labs.local/kind/kindnetd" {
				t.Errorf("kindnetd/go.mod: module %s, want kubelet-labs.local/kind/kindnetd (ours, not kind's)", f[1])
			}
		case "replace", "exclude", "retract", "tool", "ignore", "godebug", "toolchain":
			t.Errorf("kindnetd/go.mod: %q: build-go.sh refuses every directive but module, go and require", l)
		}
	}

	versions, err := os.ReadFile("versions.sh")
	if err != nil {
		t.Fatal(err)
	}
	commit := regexp.MustCompile(`(?m)^KINDNETD_COMMIT=([0-9a-f]{40})$`).FindSubmatch(versions)
	if commit == nil {
		t.Fatal("versions.sh has no KINDNETD_COMMIT=<40 hex digits>")
	}
	mainGo, err := os.ReadFile("kindnetd/main.go")
	if err != nil {
		t.Fatal(err)
	}
	wantVersion := `const version = "kubelet-labs-kindnetd (mirrors kind kindnetd ` + string(commit[1][:8]) + `)"`
	if !strings.Contains(string(mainGo), wantVersion) {
		t.Errorf("kindnetd/main.go has no %s: build-go.sh expects -version to name KINDNETD_COMMIT", wantVersion)
	}
	if !strings.Contains(string(script), `kindnetd) echo "kind kindnetd ${KINDNETD_COMMIT:0:8}" ;;`) {
		t.Error(`build-go.sh's expect has no kindnetd) echo "kind kindnetd ${KINDNETD_COMMIT:0:8}"`)
	}
}

// The trimmed CoreDNS links one package per directive and lists the
// directives in the order of CoreDNS's plugin.cfg (zdirectives.go): a
// plugin sees a query after every plugin above it, so the order is
// behaviour, not style.
func TestCorednsDirectivesFollowPluginCfg(t *testing.T) {
	src, err := os.ReadFile("coredns/main.go")
	if err != nil {
		t.Fatal(err)
	}
	var directives, imports []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(string(src)))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "var directives = []string{":
			in = true
		case in && l == "}":
			in = false
		case in:
			directives = append(directives, strings.Trim(l, `",`))
		case strings.HasPrefix(l, `_ "github.com/coredns/coredns/plugin/`):
			imports = append(imports, strings.TrimSuffix(strings.TrimPrefix(l, `_ "github.com/coredns/coredns/plugin/`), `"`))
		}
	}
	// plugin.cfg's order, for the plugins kubeadm's Corefile and log use
	// (github.com/coredns/coredns@v1.14.2 core/dnsserver/zdirectives.go:12-72)
	want := []string{"reload", "ready", "health", "prometheus", "errors", "log", "loadbalance", "cache", "kubernetes", "loop", "forward"}
	if strings.Join(directives, " ") != strings.Join(want, " ") {
		t.Errorf("coredns/main.go directives: %v\nwant (plugin.cfg order): %v", directives, want)
	}
	pkg := map[string]string{"prometheus": "metrics"} // plugin.cfg:42 prometheus:metrics
	linked := map[string]bool{}
	for _, i := range imports {
		linked[i] = true
	}
	for _, d := range directives {
		p := d
		if q, ok := pkg[d]; ok {
			p = q
		}
		if !linked[p] {
			t.Errorf("directive %s: its package plugin/%s is not imported, so Caddy would refuse it", d, p)
		}
		delete(linked, p)
	}
	for p := range linked {
		t.Errorf("plugin/%s is imported but no directive names it", p)
	}
}
