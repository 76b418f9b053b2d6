package controlplane

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// KubernetesVersion is the version every binary is built from and stamped
// with; go.mod pins k8s.io/kubernetes to it.
const KubernetesVersion = "v1.36.3"

// Binary is one upstream command built from this module's dependency graph.
type Binary struct {
	Name    string // file name in the bin folder
	Package string // Go package to build
	// Module is the Go module the package comes from when it is not
	// k8s.io/kubernetes (etcd has its own release line, v3.6.x): its
	// version is read from go.mod, so the progress line names the version
	// that is really built.
	Module string
	// ColdEstimate is an upper bound of a first build on an idle 2-core
	// machine with empty Go caches, so nobody takes a silent multi-minute
	// compile for a hang. Measured on a fresh 2-core machine: kube-apiserver
	// alone took 4m14s, all four 7.5 min (after `go run` had compiled lab 00
	// itself: 2.5 min more). On a busy machine it takes longer: with other
	// builds competing for the cores we saw kube-controller-manager 2m36s
	// and kubectl 2m6s.
	ColdEstimate time.Duration
}

// Binaries are the commands the labs need. kubectl is built too so the
// client matches the server (kubectl supports ±1 minor version of skew).
var Binaries = []Binary{
	{Name: "etcd", Package: "go.etcd.io/etcd/server/v3", Module: "go.etcd.io/etcd/server/v3", ColdEstimate: time.Minute},
	{Name: "kube-apiserver", Package: "k8s.io/kubernetes/cmd/kube-apiserver", ColdEstimate: 5 * time.Minute},
	{Name: "kube-controller-manager", Package: "k8s.io/kubernetes/cmd/kube-controller-manager", ColdEstimate: 2 * time.Minute},
	{Name: "kubectl", Package: "k8s.io/kubernetes/cmd/kubectl", ColdEstimate: 90 * time.Second},
}

// Version is the version b is built at: KubernetesVersion for the
// Kubernetes commands, else its module's version in moduleRoot's go.mod.
func (b Binary) Version(moduleRoot string) string {
	if b.Module == "" {
		return KubernetesVersion
	}
	v, err := requiredVersion(filepath.Join(moduleRoot, "go.mod"), b.Module)
	if err != nil {
		return "(version unknown: " + err.Error() + ")"
	}
	return v
}

// requiredVersion finds "module version" in a go.mod's require lines
// (single or in a block). A replace of the module is honoured too, since
// that is what the build uses.
func requiredVersion(gomod, module string) (string, error) {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	var required, replaced string
	for _, line := range strings.Split(string(data), "\n") {
		line, _, _ = strings.Cut(line, "//")
		f := strings.Fields(line)
		if len(f) > 0 && (f[0] == "require" || f[0] == "replace") {
			f = f[1:]
		}
		switch {
		case len(f) == 2 && f[0] == module:
			required = f[1]
		case len(f) == 4 && f[0] == module && f[1] == "=>":
			replaced = f[3] // module => other version
		case len(f) == 5 && f[0] == module && f[2] == "=>":
			replaced = f[4] // module version => other version
		}
	}
	if replaced != "" {
		return replaced, nil
	}
	if required == "" {
		return "", fmt.Errorf("%s is not required in %s", module, gomod)
	}
	return required, nil
}

// VersionLDFlags stamp component-base/version, else the binaries report
// v0.0.0-master and kubectl warns about skew. Labs that run upstream code
// in-process (the fake node) are built with them too (boot.sh, tests).
var VersionLDFlags = strings.Join([]string{
	"-X", "k8s.io/component-base/version.gitVersion=" + KubernetesVersion,
	"-X", "k8s.io/component-base/version.gitMajor=1",
	"-X", "k8s.io/component-base/version.gitMinor=36",
	"-X", "k8s.io/component-base/version.gitTreeState=clean",
}, " ")

// stampFile records which version the bin folder was built for, so a bump
// of go.mod rebuilds instead of silently running old binaries.
const stampFile = ".kubernetes-version"

// MissingBinaries lists the binaries not yet built (or built for another version).
func MissingBinaries(binDir string) []Binary {
	stamp, _ := os.ReadFile(filepath.Join(binDir, stampFile))
	stale := strings.TrimSpace(string(stamp)) != KubernetesVersion
	var missing []Binary
	for _, b := range Binaries {
		if _, err := os.Stat(filepath.Join(binDir, b.Name)); err != nil || stale {
			missing = append(missing, b)
		}
	}
	return missing
}

// BuildCommand is the shell command that builds the binaries by hand; error
// messages print it.
func BuildCommand() string { return "go run ./labs/00-cluster --build-only" }

// EnsureBinaries builds whatever is missing from binDir, one binary at a
// time with a progress line each, under an exclusive file lock so parallel
// test packages build once and wait for each other. moduleRoot is the
// repository root (the go.mod that pins the versions).
func EnsureBinaries(moduleRoot, binDir string, progress io.Writer) error {
	if len(MissingBinaries(binDir)) == 0 {
		return nil // fast path, no lock
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return fmt.Errorf("bin folder %s: %w", binDir, err)
	}
	lock, err := lockFile(filepath.Join(binDir, ".build.lock"), true)
	if err != nil {
		return err
	}
	defer lock.Unlock()

	missing := MissingBinaries(binDir) // another process may have built them while we waited
	for i, b := range missing {
		est := fmt.Sprintf(" (first build: up to ~%s on 2 idle cores with empty Go caches; later: seconds)", b.ColdEstimate.Round(time.Second))
		fmt.Fprintf(progress, "building %s %s [%d/%d]%s...\n", b.Name, b.Version(moduleRoot), i+1, len(missing), est)
		start := time.Now()
		if err := goBuild(moduleRoot, binDir, b); err != nil {
			return err
		}
		fmt.Fprintf(progress, "built %s in %s\n", b.Name, time.Since(start).Round(100*time.Millisecond))
	}
	return os.WriteFile(filepath.Join(binDir, stampFile), []byte(KubernetesVersion+"\n"), 0o644)
}

func goBuild(moduleRoot, binDir string, b Binary) error {
	tmp := filepath.Join(binDir, "."+b.Name+".tmp")
	cmd := exec.Command("go", "build", "-ldflags", "-s -w "+VersionLDFlags, "-o", tmp, b.Package)
	cmd.Dir = moduleRoot
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("building %s failed (%v):\n%s\nretry by hand with: %s", b.Name, err, tailLines(out.String(), 30), BuildCommand())
	}
	// Rename is atomic: a reader never sees half a binary.
	return os.Rename(tmp, filepath.Join(binDir, b.Name))
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
