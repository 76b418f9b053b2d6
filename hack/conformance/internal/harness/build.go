package harness

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"kubelet-labs/hack/conformance/internal/cachelock"
	"kubelet-labs/internal/checkout"
	"kubelet-labs/internal/controlplane"
)

// program is a Go program the run needs, built into the cache folder.
type program struct {
	name string
	// pkg is built in the module at dir (the nested module by default).
	pkg string
	// test: `go test -c` (the e2e binary) instead of `go build`.
	test   bool
	static bool // CGO_ENABLED=0 (what goes into an image)
	flags  []string
	// always: no cache key; go's own build cache decides (our kubelet,
	// whose source changes between runs).
	always bool
	// inRepo: built in the repository's own module (lab 18).
	inRepo bool
	// keyFiles are hashed into the cache key besides go.mod, go.sum and
	// the Go version.
	keyFiles []string
	// ownModule, when set, is built in a module of its own written for it
	// (a program whose dependencies the nested module does not hold).
	ownModule *ownModule
	// solution, when set (inRepo programs), is a patch of solutions/
	// applied to a copy of the checkout the program is built in.
	solution string
}

func (l *Layout) programs() map[string]program {
	return map[string]program{
		"e2e.test": {name: "e2e.test", pkg: "./e2e", test: true, flags: []string{"-tags", "conformance"},
			keyFiles: []string{filepath.Join(l.Module, "e2e", "e2e_test.go")}},
		// the whole suite (e2e/suite_test.go): the certified and node suites
		E2ECertified: {name: E2ECertified, pkg: "./e2e", test: true, flags: []string{"-tags", "conformance,certified"},
			keyFiles: []string{filepath.Join(l.Module, "e2e", "e2e_test.go"), filepath.Join(l.Module, "e2e", "suite_test.go")}},
		"ginkgo":         {name: "ginkgo", pkg: "github.com/onsi/ginkgo/v2/ginkgo"},
		"kube-scheduler": {name: "kube-scheduler", pkg: "k8s.io/kubernetes/cmd/kube-scheduler", flags: []string{"-ldflags", "-s -w " + controlplane.VersionLDFlags}},
		// agnhost is built as the control plane is (cgo on), not static:
		// CGO_ENABLED=0 is another build configuration, a cold compile of
		// every Kubernetes package it imports (25+ min here on a busy
		// machine), while this one reuses lab 00's build cache; the image
		// carries the C library it loads (internal/images).
		"agnhost": {name: "agnhost", pkg: "k8s.io/kubernetes/test/images/agnhost", flags: []string{"-ldflags", "-s -w"}},
		"nnp":     {name: "nnp", pkg: "k8s.io/kubernetes/test/images/nonewprivs", static: true, flags: []string{"-ldflags", "-s -w"}},
		// the cluster add-ons of a full cluster (cluster.go): kube-proxy
		// as the control plane is built (cgo on, lab 00's build cache; its
		// image carries the C library, as agnhost's), CoreDNS as kind's
		// node image has it (scripts/kind/coredns/main.go, the plugins of
		// kubeadm's Corefile) at the version kubeadm v1.36 pins
		"kube-proxy": {name: "kube-proxy", pkg: "k8s.io/kubernetes/cmd/kube-proxy", flags: []string{"-ldflags", "-s -w " + controlplane.VersionLDFlags}},
		"coredns": {name: "coredns", pkg: "./main.go", static: true,
			flags:     []string{"-trimpath", "-ldflags", "-s -w -X github.com/coredns/coredns/coremain.GitCommit=kubelet-labs-trimmed"},
			keyFiles:  []string{filepath.Join(l.Repo, "scripts", "kind", "coredns", "main.go")},
			ownModule: &ownModule{path: "kubelet-labs.local/conformance/coredns", require: "github.com/coredns/coredns " + CoreDNSVersion, main: filepath.Join(l.Repo, "scripts", "kind", "coredns", "main.go")}},
		// the aggregator spec's image (internal/images/suite.go); cgo on
		// like agnhost, for the same reason
		"sample-apiserver": {name: "sample-apiserver", pkg: "k8s.io/sample-apiserver", flags: []string{"-ldflags", "-s -w"}},
		"mykubelet":        {name: "mykubelet", pkg: "./labs/18-mykubelet", always: true, inRepo: true},
		"fakenode":         {name: "fakenode", pkg: "./labs/01-fake-node", always: true, inRepo: true},
		// lab 18 with its exercise solved (SOLVED=1)
		"mykubelet-solved": {name: "mykubelet-solved", pkg: "./labs/18-mykubelet", always: true, inRepo: true, solution: "18-mykubelet.patch"},
	}
}

// Build builds the named program unless the cache folder holds one built
// from the same go.mod, go.sum, Go version and sources; it returns its path.
func (l *Layout) Build(name string, progress io.Writer) (string, error) {
	p, ok := l.programs()[name]
	if !ok {
		return "", fmt.Errorf("no program %q", name)
	}
	bin := filepath.Join(l.BinDir, p.name)
	key, err := l.key(p)
	if err != nil {
		return "", err
	}
	if !p.always && built(bin, key) {
		return bin, nil
	}
	if err := os.MkdirAll(l.BinDir, 0o755); err != nil {
		return "", err
	}
	// two test binaries may build the same program at once: one at a
	// time, and the second finds the first one's
	unlock, err := cachelock.Hold(bin)
	if err != nil {
		return "", err
	}
	defer unlock()
	if !p.always && built(bin, key) {
		return bin, nil
	}
	start := time.Now()
	fmt.Fprintf(progress, "building %s (%s)...\n", p.name, p.pkg)
	tmp := bin + ".tmp"
	args := []string{"build"}
	if p.test {
		args = []string{"test", "-c", "-vet=off"}
	}
	args = append(append(args, p.flags...), "-o", tmp, p.pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir = l.Module
	if p.inRepo {
		cmd.Dir = l.Repo
	}
	if p.solution != "" {
		if cmd.Dir, err = l.solvedCopy(p.name, p.solution); err != nil {
			return "", err
		}
	}
	cmd.Env = os.Environ()
	if p.ownModule != nil {
		if cmd.Dir, err = l.writeOwnModule(p.name, *p.ownModule); err != nil {
			return "", err
		}
		// its go.mod names only the one requirement: go resolves the rest
		// from the module proxy, checked against the checksum database
		cmd.Env = append(cmd.Env, "GOFLAGS=-mod=mod")
	}
	if p.static {
		cmd.Env = append(cmd.Env, "CGO_ENABLED=0")
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go %s (in %s) failed: %v\n%s", strings.Join(args, " "), cmd.Dir, err, out.String())
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	fmt.Fprintf(progress, "built %s in %s\n", p.name, time.Since(start).Round(time.Second))
	if !p.always {
		if err := os.WriteFile(bin+".key", []byte(key), 0o644); err != nil {
			return "", err
		}
	}
	return bin, nil
}

// key is what a cached build must match.
func (l *Layout) key(p program) (string, error) {
	h := sha256.New()
	ver, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOVERSION: %w", err)
	}
	fmt.Fprintf(h, "%s\n%s\n%q\n%v\n", ver, p.pkg, p.flags, p.static)
	for _, f := range append([]string{filepath.Join(l.Module, "go.mod"), filepath.Join(l.Module, "go.sum")}, p.keyFiles...) {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// E2ECertified is the e2e binary with every spec package of test/e2e.
const E2ECertified = "e2e-certified.test"

// E2EBinary is the e2e binary a suite needs: the default suite's specs
// are all in the smaller one.
func E2EBinary(suite string) string {
	if suite == SuiteCertified || suite == SuiteNode {
		return E2ECertified
	}
	return "e2e.test"
}

// CoreDNSVersion is the CoreDNS kubeadm v1.36 deploys
// (cmd/kubeadm/app/constants/constants.go:372 at v1.36.3), as
// scripts/kind/versions.sh pins it for the kind node image.
const CoreDNSVersion = "v1.14.2"

// ownModule is a one-file program built in a module written for it.
type ownModule struct {
	path, require string
	// main is the program's source, copied in as main.go.
	main string
}

// writeOwnModule writes <Dir>/src/NAME: go.mod with the one requirement
// and the go directive of the nested module, and main.go; it returns the
// folder.
func (l *Layout) writeOwnModule(name string, m ownModule) (string, error) {
	dir := filepath.Join(l.Dir, "src", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	src, err := os.ReadFile(m.main)
	if err != nil {
		return "", err
	}
	nested, err := os.ReadFile(filepath.Join(l.Module, "go.mod"))
	if err != nil {
		return "", err
	}
	goLine := "go 1.26.0"
	for _, line := range strings.Split(string(nested), "\n") {
		if strings.HasPrefix(line, "go ") {
			goLine = line
			break
		}
	}
	mod := fmt.Sprintf("// Written by hack/conformance (harness/build.go): %s, built from %s.\nmodule %s\n\n%s\n\nrequire %s\n", name, m.main, m.path, goLine, m.require)
	// keep the go.mod and go.sum go completed last time when what they
	// were written from is unchanged (go.mod.written remembers it)
	if old, _ := os.ReadFile(filepath.Join(dir, "go.mod.written")); string(old) != mod {
		os.Remove(filepath.Join(dir, "go.sum"))
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, "go.mod.written"), []byte(mod), 0o644); err != nil {
			return "", err
		}
	}
	return dir, os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644)
}

// solvedCopy writes <Dir>/src/NAME afresh: the checkout as git sees it,
// with solutions/PATCH applied; it returns the folder.
func (l *Layout) solvedCopy(name, patch string) (string, error) {
	dir := filepath.Join(l.Dir, "src", name)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := checkout.Copy(l.Repo, dir); err != nil {
		return "", err
	}
	// The copy is in the state folder, which may be inside the checkout
	// (.labs/): git would take the checkout for the copy's repository,
	// and `git apply` in a subfolder of a repository skips every path
	// outside that subfolder — all of them — and says nothing. With the
	// copy's parent as a ceiling, git finds no repository and patches the
	// folder as patch(1) would; the reverse check proves it did.
	file := filepath.Join(l.Repo, "solutions", patch)
	for _, args := range [][]string{{"apply", "--whitespace=nowarn", file}, {"apply", "--check", "--reverse", file}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(dir))
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("git %s (in a copy of the checkout): %v: %s", strings.Join(args[:len(args)-1], " ")+" solutions/"+patch, err, bytes.TrimSpace(out))
		}
	}
	return dir, nil
}
