package envcheck

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lima-vm/lima/pkg/limayaml"
	"github.com/lima-vm/lima/pkg/version"
	"github.com/sirupsen/logrus"
	"golang.org/x/mod/modfile"
)

// repoRoot is the kubelet-labs repository: two levels up, where go.mod says
// `module kubelet-labs`.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if got := modulePath(t, filepath.Join(root, "go.mod")); got != "kubelet-labs" {
		t.Fatalf("%s/go.mod is module %q, want kubelet-labs: run this test from hack/envcheck", root, got)
	}
	return root
}

func readRepoFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parseModFile(t *testing.T, path string) *modfile.File {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse(path, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func modulePath(t *testing.T, path string) string {
	t.Helper()
	return parseModFile(t, path).Module.Mod.Path
}

// required returns the version go.mod at path requires of module mod.
func required(t *testing.T, path, mod string) string {
	t.Helper()
	for _, r := range parseModFile(t, path).Require {
		if r.Mod.Path == mod {
			return r.Mod.Version
		}
	}
	t.Fatalf("%s does not require %s", path, mod)
	return ""
}

// warningHook collects what Lima logs at warning level or above: Lima only
// warns (never fails) on non-strict YAML and on templates it cannot expand.
type warningHook struct {
	mu      sync.Mutex
	entries []string
}

func (h *warningHook) Levels() []logrus.Level {
	return []logrus.Level{logrus.PanicLevel, logrus.FatalLevel, logrus.ErrorLevel, logrus.WarnLevel}
}

func (h *warningHook) Fire(e *logrus.Entry) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	msg := e.Message
	if err, ok := e.Data[logrus.ErrorKey]; ok {
		msg += ": " + toString(err)
	}
	h.entries = append(h.entries, msg)
	return nil
}

func toString(v any) string {
	if err, ok := v.(error); ok {
		return err.Error()
	}
	if s, ok := v.(string); ok {
		return s
	}
	return "?"
}

var installHook sync.Once
var hook = &warningHook{}

// limaWarnings runs f and returns what Lima warned about meanwhile.
func limaWarnings(f func()) []string {
	installHook.Do(func() { logrus.AddHook(hook) })
	hook.mu.Lock()
	hook.entries = nil
	hook.mu.Unlock()
	f()
	hook.mu.Lock()
	defer hook.mu.Unlock()
	return append([]string(nil), hook.entries...)
}

// loadVM loads vm.yaml the way `limactl start` does for a new instance named
// instanceName: limayaml.Load fills Lima's defaults (FillDefault), with an
// override file (Lima's own mechanism, $LIMA_HOME/_config/override.yaml)
// that picks the architecture, then limayaml.Validate. Any warning Lima logs
// fails the test.
func loadVM(t *testing.T, arch limayaml.Arch) *limayaml.LimaYAML {
	t.Helper()
	// Validate compares minimumLimaVersion with the running Lima, which a
	// library build does not know: tell it the version this module requires.
	version.Version = strings.TrimPrefix(required(t, "go.mod", "github.com/lima-vm/lima"), "v")

	limaHome := t.TempDir()
	t.Setenv("LIMA_HOME", limaHome)
	if err := os.MkdirAll(filepath.Join(limaHome, "_config"), 0o755); err != nil {
		t.Fatal(err)
	}
	// QEMU runs any architecture; VZ only the host's (Validate checks it).
	override := "arch: " + arch + "\nvmType: qemu\n"
	if err := os.WriteFile(filepath.Join(limaHome, "_config", "override.yaml"), []byte(override), 0o644); err != nil {
		t.Fatal(err)
	}

	b := readRepoFile(t, "vm.yaml")
	instFile := filepath.Join(t.TempDir(), instanceName, "lima.yaml")
	var y *limayaml.LimaYAML
	warnings := limaWarnings(func() {
		var err error
		if y, err = limayaml.Load(b, instFile); err != nil {
			t.Fatalf("limayaml.Load(vm.yaml): %v", err)
		}
		if err := limayaml.Validate(y, true); err != nil {
			t.Fatalf("limayaml.Validate(vm.yaml) for %s: %v", arch, err)
		}
	})
	for _, w := range warnings {
		t.Errorf("Lima warns about vm.yaml (%s): %s", arch, w)
	}
	return y
}

// rawVM is vm.yaml as written: Lima's own unmarshalling, no defaults.
func rawVM(t *testing.T) *limayaml.LimaYAML {
	t.Helper()
	var y limayaml.LimaYAML
	if err := limayaml.Unmarshal(readRepoFile(t, "vm.yaml"), &y, "vm.yaml"); err != nil {
		t.Fatal(err)
	}
	return &y
}

// dataFile returns the content of vm.yaml's `mode: data` provision for path.
func dataFile(t *testing.T, y *limayaml.LimaYAML, path string) string {
	t.Helper()
	for _, p := range y.Provision {
		if p.Mode == limayaml.ProvisionModeData && p.Path != nil && *p.Path == path {
			if p.Content == nil {
				t.Fatalf("vm.yaml: data provision %s has no content", path)
			}
			return *p.Content
		}
	}
	t.Fatalf("vm.yaml has no `mode: data` provision for %s", path)
	return ""
}

// pins parses versions.env (KEY=VALUE lines, # comments).
func pins(t *testing.T, y *limayaml.LimaYAML) map[string]string {
	t.Helper()
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(dataFile(t, y, pinsPath)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.ContainsAny(v, " \t'\"$`") {
			t.Fatalf("%s: %q is not a plain KEY=VALUE line", pinsPath, line)
		}
		if _, dup := m[k]; dup {
			t.Fatalf("%s: %s set twice", pinsPath, k)
		}
		m[k] = v
	}
	return m
}

const (
	pinsPath  = "/etc/kubelet-labs/versions.env"
	libPath   = "/usr/local/lib/kubelet-labs/lib.sh"
	checkPath = "/usr/local/bin/kubelet-labs-check"
	markPath  = "/run/kubelet-labs/provisioned"
)
