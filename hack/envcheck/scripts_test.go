package envcheck

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lima-vm/lima/pkg/limayaml"
)

// The provisioning shell code of vm.yaml, run for real: bash parses every
// script, the architecture mapping, the checksum verification against a
// local HTTP server, and the self-check against fake tools.

func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is needed to test vm.yaml's provisioning scripts (Debian: apt-get install %s)", name, name)
	}
	return p
}

func TestVMYAMLScriptsParse(t *testing.T) {
	bash := needTool(t, "bash")
	raw := rawVM(t)
	texts := map[string]string{
		libPath:   dataFile(t, raw, libPath),
		checkPath: dataFile(t, raw, checkPath),
	}
	for i, p := range raw.Provision {
		if p.Mode != limayaml.ProvisionModeData {
			texts[fmt.Sprintf("provision[%d] (%s)", i, p.Mode)] = p.Script
		}
	}
	for i, p := range raw.Probes {
		texts[fmt.Sprintf("probe[%d]", i)] = p.Script
	}
	for name, text := range texts {
		cmd := exec.Command(bash, "-n")
		cmd.Stdin = strings.NewReader(text)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", name, err, out)
		}
	}
}

// sandbox writes versions.env, lib.sh and kubelet-labs-check into a temp
// folder, pointing their absolute paths at each other there, plus a bin
// folder for fake tools that comes first on PATH.
type sandbox struct {
	dir, bin, lib, check string
}

func newSandbox(t *testing.T) *sandbox {
	t.Helper()
	raw := rawVM(t)
	s := &sandbox{dir: t.TempDir()}
	s.bin = filepath.Join(s.dir, "bin")
	if err := os.Mkdir(s.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	pinsFile := filepath.Join(s.dir, "versions.env")
	s.lib = filepath.Join(s.dir, "lib.sh")
	s.check = filepath.Join(s.dir, "kubelet-labs-check")
	write := func(path, content string, mode os.FileMode) {
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	replaceOnce := func(text, old, repl, where string) string {
		if n := strings.Count(text, old); n != 1 {
			t.Fatalf("%s mentions %s %d times, want once", where, old, n)
		}
		return strings.Replace(text, old, repl, 1)
	}
	write(pinsFile, dataFile(t, raw, pinsPath), 0o644)
	write(s.lib, replaceOnce(dataFile(t, raw, libPath), pinsPath, pinsFile, "lib.sh"), 0o644)
	write(s.check, replaceOnce(dataFile(t, raw, checkPath), libPath, s.lib, "kubelet-labs-check"), 0o755)
	return s
}

// fake writes an executable bin/name that runs the given shell body.
func (s *sandbox) fake(t *testing.T, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(s.bin, name), []byte("#!/bin/bash\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func (s *sandbox) run(t *testing.T, script string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(needTool(t, "bash"), append([]string{"-c", script, "sandbox"}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+s.bin+":"+os.Getenv("PATH"), "LIB="+s.lib)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestProvisionArch(t *testing.T) {
	s := newSandbox(t)
	for machine, want := range map[string]string{"x86_64": "amd64", "aarch64": "arm64"} {
		s.fake(t, "uname", `[ "$1" = -m ] && echo `+machine)
		out, err := s.run(t, `set -euo pipefail; . "$LIB"; labs_arch; labs_sha256 KIND`)
		if err != nil {
			t.Fatalf("uname -m = %s: %v\n%s", machine, err, out)
		}
		lines := strings.Fields(out)
		if len(lines) != 2 || lines[0] != want {
			t.Fatalf("uname -m = %s: labs_arch says %q, want %s", machine, out, want)
		}
		if p := pins(t, rawVM(t)); lines[1] != p["KIND_SHA256_"+want] {
			t.Errorf("uname -m = %s: labs_sha256 KIND = %s, want KIND_SHA256_%s", machine, lines[1], want)
		}
	}
	s.fake(t, "uname", `echo riscv64`)
	out, err := s.run(t, `set -euo pipefail; . "$LIB"; labs_arch`)
	if err == nil || !strings.Contains(out, "unsupported architecture riscv64") {
		t.Errorf("riscv64: want a failure naming the architecture, got err=%v\n%s", err, out)
	}
}

func TestProvisionFetchVerifiesChecksums(t *testing.T) {
	needTool(t, "curl")
	body := []byte("pretend this is kubectl\n")
	sum := sha256.Sum256(body)
	good := hex.EncodeToString(sum[:])
	other := strings.Repeat("ab", 32)
	mux := http.NewServeMux()
	mux.HandleFunc("/kubectl", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) })
	// formats upstream uses: dl.k8s.io and go.dev a bare hash, kind "hash  name"
	mux.HandleFunc("/kubectl.sha256", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(good)) })
	mux.HandleFunc("/kind-style.sha256sum", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(good + "  kubectl\n")) })
	mux.HandleFunc("/other.sha256", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(other)) })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	s := newSandbox(t)
	fetch := `set -euo pipefail; . "$LIB"; labs_fetch "$1" "$2" "$3" "$4"`
	cases := []struct {
		name, pin, sums string
		ok              bool
		msg             string
	}{
		{"pin and published file agree", good, "/kubectl.sha256", true, ""},
		{"kind's sha256sum format", good, "/kind-style.sha256sum", true, ""},
		{"download differs from the pin", other, "/other.sha256", false, "but the pin is " + other},
		{"published file differs from the pin", good, "/other.sha256", false, "publishes " + other},
		{"published file missing", good, "/missing.sha256", false, "cannot fetch the published checksum"},
		{"download missing", good, "/kubectl.sha256", false, "download failed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			destDir := t.TempDir()
			dest := filepath.Join(destDir, "kubectl")
			url := srv.URL + "/kubectl"
			if c.msg == "download failed" {
				url = srv.URL + "/nothing-here"
			}
			out, err := s.run(t, fetch, url, c.pin, srv.URL+c.sums, dest)
			got, readErr := os.ReadFile(dest)
			if c.ok {
				if err != nil || readErr != nil || string(got) != string(body) {
					t.Fatalf("want %s installed: err=%v read=%v\n%s", dest, err, readErr, out)
				}
			} else {
				if err == nil || !strings.Contains(out, c.msg) {
					t.Fatalf("want a failure saying %q, got err=%v\n%s", c.msg, err, out)
				}
				if readErr == nil {
					t.Fatalf("%s was installed despite the failure", dest)
				}
			}
			if left, _ := filepath.Glob(dest + ".*"); len(left) > 0 {
				t.Errorf("temporary files left behind: %v", left)
			}
		})
	}
}

// fakeTools installs fake docker, kind, kubectl, go and uname printing what
// the real ones print (formats of Docker 20.10, kind 0.32, kubectl 1.36, go).
func fakeTools(t *testing.T, s *sandbox, p map[string]string, machine, goArch string) {
	s.fake(t, "uname", `[ "$1" = -m ] && echo `+machine)
	s.fake(t, "docker", `case "$1" in
--version) echo "Docker version `+p["DOCKER_VERSION"]+`+dfsg1, build 297e128" ;;
version) cat <<'EOF'
Client:
 Version:           `+p["DOCKER_VERSION"]+`+dfsg1
 API version:       1.41
 Go version:        go1.19.8

Server:
 Engine:
  Version:          `+p["DOCKER_VERSION"]+`+dfsg1
  API version:      1.41 (minimum version 1.12)
 containerd:
  Version:          1.6.20~ds1
EOF
;;
esac`)
	s.fake(t, "kind", `echo "kind `+p["KIND_VERSION"]+` go1.25.5 linux/`+goArch+`"`)
	s.fake(t, "kubectl", `printf 'Client Version: %s\nKustomize Version: v5.7.1\n' `+p["KUBECTL_VERSION"])
	s.fake(t, "go", `echo "go version go`+p["GO_VERSION"]+` linux/`+goArch+`"`)
}

func TestSelfCheck(t *testing.T) {
	p := pins(t, rawVM(t))
	for machine, goArch := range map[string]string{"x86_64": "amd64", "aarch64": "arm64"} {
		t.Run(machine, func(t *testing.T) {
			s := newSandbox(t)
			fakeTools(t, s, p, machine, goArch)
			out, err := s.run(t, `exec "$1"`, s.check)
			if err != nil {
				t.Fatalf("kubelet-labs-check fails with the pinned tools: %v\n%s", err, out)
			}
			for _, tool := range []string{"docker", "docker daemon", "kind", "kubectl", "go"} {
				if !hasOKLine(out, tool) {
					t.Errorf("no ok line for %s:\n%s", tool, out)
				}
			}
		})
	}

	t.Run("wrong versions and a daemon out of reach", func(t *testing.T) {
		s := newSandbox(t)
		fakeTools(t, s, p, "x86_64", "amd64")
		s.fake(t, "kind", `echo "kind v0.31.0 go1.25.5 linux/amd64"`)
		s.fake(t, "go", `echo "go version go`+p["GO_VERSION"]+` linux/arm64"`)
		// what docker prints when the user may not use the socket
		s.fake(t, "docker", `case "$1" in
--version) echo "Docker version `+p["DOCKER_VERSION"]+`+dfsg1, build 297e128" ;;
version) printf 'Client:\n Version:           %s+dfsg1\n' `+p["DOCKER_VERSION"]+`; echo "permission denied while trying to connect to the Docker daemon socket" >&2; exit 1 ;;
esac`)
		out, err := s.run(t, `exec "$1"`, s.check)
		if err == nil {
			t.Fatalf("kubelet-labs-check passes with wrong tools:\n%s", out)
		}
		for _, want := range []string{
			"FAIL  kind           v0.31.0 (pinned: " + p["KIND_VERSION"] + ")",
			"FAIL  go             go" + p["GO_VERSION"] + " linux/arm64 (pinned: go" + p["GO_VERSION"] + " linux/amd64)",
			"FAIL  docker daemon  missing (pinned: " + p["DOCKER_VERSION"] + ")",
			"ok    kubectl        " + p["KUBECTL_VERSION"],
		} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("tools missing", func(t *testing.T) {
		s := newSandbox(t)
		s.fake(t, "uname", `echo x86_64`)
		// an empty PATH apart from our bin and the basics the script uses
		cmd := exec.Command(needTool(t, "bash"), s.check)
		basics := t.TempDir()
		for _, tool := range []string{"awk", "sed", "cat", "printf"} {
			if p, err := exec.LookPath(tool); err == nil {
				_ = os.Symlink(p, filepath.Join(basics, tool))
			}
		}
		cmd.Env = append(os.Environ(), "PATH="+s.bin+":"+basics)
		out, err := cmd.CombinedOutput()
		if err == nil || strings.Count(string(out), "FAIL") != 5 {
			t.Errorf("want 5 FAIL lines and exit 1 with no tools, got err=%v\n%s", err, out)
		}
	})
}

// hasOKLine: out has the line `ok    <tool padded to 14> <version>`.
func hasOKLine(out, tool string) bool {
	prefix := fmt.Sprintf("ok    %-14s ", tool)
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, prefix) {
			return true
		}
	}
	return false
}
