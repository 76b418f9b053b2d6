package envcheck

import (
	"bytes"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"

	"github.com/lima-vm/lima/pkg/limayaml"
	"github.com/opencontainers/go-digest"
	"golang.org/x/mod/semver"
)

// Both architectures the course supports, as Lima names them, and the name
// Debian, Go and Kubernetes use in download URLs.
var arches = map[limayaml.Arch]string{
	limayaml.X8664:   "amd64",
	limayaml.AARCH64: "arm64",
}

// TestVMYAMLLimaValidates: Lima's own Load (with its defaults) and Validate
// accept vm.yaml on both architectures, without a single warning, and the
// image Lima would boot on each is a pinned Debian image of that
// architecture.
func TestVMYAMLLimaValidates(t *testing.T) {
	for arch, debArch := range arches {
		t.Run(arch, func(t *testing.T) {
			y := loadVM(t, arch)
			if *y.Arch != arch {
				t.Fatalf("arch after Load is %s, want %s", *y.Arch, arch)
			}
			// Lima boots the first image of the instance's architecture and
			// falls back to the next ones only if a download fails.
			var first *limayaml.Image
			for i := range y.Images {
				img := &y.Images[i]
				if img.Arch != arch {
					continue
				}
				if !strings.Contains(img.Location, "-"+debArch) || !strings.HasPrefix(img.Location, "https://cloud.debian.org/images/cloud/bookworm/") {
					t.Errorf("image for %s is not a Debian 12 %s image: %s", arch, debArch, img.Location)
				}
				if first == nil {
					first = img
				}
			}
			if first == nil {
				t.Fatalf("no image for %s", arch)
			}
			if first.Digest == "" || first.Digest.Algorithm() != digest.SHA512 {
				t.Errorf("first image for %s (%s) is not pinned by a sha512 digest: %q", arch, first.Location, first.Digest)
			}
			if strings.Contains(first.Location, "/latest/") {
				t.Errorf("first image for %s is the moving 'latest': %s", arch, first.Location)
			}
		})
	}
}

// TestVMYAMLResources: the size the docs promise, and no Lima containerd.
func TestVMYAMLResources(t *testing.T) {
	raw := rawVM(t)
	if raw.CPUs == nil || *raw.CPUs != 4 {
		t.Errorf("cpus = %v, want 4", raw.CPUs)
	}
	if raw.Memory == nil || *raw.Memory != "8GiB" {
		t.Errorf("memory = %v, want 8GiB", raw.Memory)
	}
	// Lima installs nerdctl + rootless containerd by default; kind uses
	// Docker and the labs start their own containerd.
	if raw.Containerd.System == nil || *raw.Containerd.System || raw.Containerd.User == nil || *raw.Containerd.User {
		t.Errorf("containerd.system and containerd.user must both be false")
	}
	if raw.VMType != nil {
		t.Errorf("vmType is set (%s): leave it to Lima (vz on macOS, qemu on Linux)", *raw.VMType)
	}
}

// TestVMYAMLMountsTheRepository: the host's home is mounted at the same path,
// so the repository (anywhere under it) has the same path inside the VM.
func TestVMYAMLMountsTheRepository(t *testing.T) {
	raw := rawVM(t)
	if len(raw.Mounts) != 1 || raw.Mounts[0].Location != "~" {
		t.Fatalf("mounts = %+v, want exactly one, of ~", raw.Mounts)
	}
	if raw.Mounts[0].MountPoint != nil {
		t.Errorf("mounts[0].mountPoint is set: the repository must keep its host path")
	}
	if raw.Mounts[0].Writable == nil || *raw.Mounts[0].Writable {
		t.Errorf("mounts[0] must say writable: false (docs/vm.md: edit on the host, --mount-writable to change)")
	}
	y := loadVM(t, limayaml.X8664)
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	m := y.Mounts[0]
	if m.Location != home || m.MountPoint == nil || *m.MountPoint != home {
		t.Errorf("after Lima's defaults the mount is %s -> %v, want %s -> %s", m.Location, m.MountPoint, home, home)
	}
}

// TestVMYAMLMountTypeWorksOnDebian: under QEMU (every Linux host) Lima's
// default mount type is 9p, which Debian's cloud kernel lacks: the guest
// logs "Activate mounts: FAIL: mount -a" and the repository is absent in the
// VM (booted and seen, hack/vmtest). vm.yaml must rule 9p out, as Lima's own
// debian-12 template does, so that Lima picks reverse-sshfs; and it must not
// force a type, so macOS keeps virtiofs under vz.
func TestVMYAMLMountTypeWorksOnDebian(t *testing.T) {
	raw := rawVM(t)
	if !slices.Contains(raw.MountTypesUnsupported, limayaml.NINEP) {
		t.Errorf("mountTypesUnsupported = %v, must contain %q (Debian's cloud kernel has no 9p)", raw.MountTypesUnsupported, limayaml.NINEP)
	}
	if raw.MountType != nil {
		t.Errorf("mountType is set (%s): leave it to Lima (virtiofs under vz, reverse-sshfs under QEMU)", *raw.MountType)
	}
	for arch := range arches {
		y := loadVM(t, arch) // vmType: qemu, as on Linux
		if got := ptrString(y.MountType); got != limayaml.REVSSHFS {
			t.Errorf("%s under QEMU: Lima resolves mountType to %s, want %s", arch, got, limayaml.REVSSHFS)
		}
	}
}

// TestVMYAMLPins: the pinned versions are the ones the rest of the repository
// uses, and every download has a sha256 per architecture.
func TestVMYAMLPins(t *testing.T) {
	raw := rawVM(t)
	p := pins(t, raw)
	mainMod := repoRoot(t) + "/go.mod"

	want := map[string]string{
		// kubectl = the Kubernetes of go.mod
		"KUBECTL_VERSION": required(t, mainMod, "k8s.io/kubernetes"),
		// kind = the kind whose types validate yaml/kind-config.yaml here
		"KIND_VERSION":    required(t, "go.mod", "sigs.k8s.io/kind"),
		"KIND_NODE_IMAGE": scriptVar(t, "scripts/kind/build-image.sh", "NODE_IMAGE"),
		"DOCKER_VERSION":  "20.10.24",
	}
	for k, v := range want {
		if p[k] != v {
			t.Errorf("%s=%q in vm.yaml, want %q", k, p[k], v)
		}
	}
	// Go: the go directive of go.mod is "1.26.0"; any 1.26.x builds it.
	goDirective := parseModFile(t, mainMod).Go.Version
	if semver.MajorMinor("v"+p["GO_VERSION"]) != semver.MajorMinor("v"+goDirective) || semver.Compare("v"+p["GO_VERSION"], "v"+goDirective) < 0 {
		t.Errorf("GO_VERSION=%s does not build go.mod's go %s", p["GO_VERSION"], goDirective)
	}
	if !regexp.MustCompile(`^1\.\d+\.\d+$`).MatchString(p["GO_VERSION"]) {
		t.Errorf("GO_VERSION=%q is not an exact release like 1.26.8", p["GO_VERSION"])
	}

	hex64 := regexp.MustCompile(`^[0-9a-f]{64}$`)
	for _, tool := range []string{"GO", "KIND", "KUBECTL"} {
		var sums []string
		for _, debArch := range arches {
			k := tool + "_SHA256_" + debArch
			if !hex64.MatchString(p[k]) {
				t.Errorf("%s=%q is not a sha256", k, p[k])
			}
			sums = append(sums, p[k])
		}
		if sums[0] == sums[1] {
			t.Errorf("%s: the amd64 and arm64 sha256 are the same", tool)
		}
	}

	// The image yaml/kind-config.yaml pins is the same one.
	if kc := string(readRepoFile(t, "yaml/kind-config.yaml")); !strings.Contains(kc, "image: "+p["KIND_NODE_IMAGE"]+"\n") {
		t.Errorf("yaml/kind-config.yaml does not pin %s", p["KIND_NODE_IMAGE"])
	}

	// Every pin is used: the installers download with it and the self-check
	// compares with it.
	var scripts strings.Builder
	for _, pr := range raw.Provision {
		scripts.WriteString(pr.Script)
	}
	check := dataFile(t, raw, checkPath)
	for _, v := range []string{"GO_VERSION", "KIND_VERSION", "KUBECTL_VERSION", "DOCKER_VERSION"} {
		if !strings.Contains(scripts.String(), "${"+v+"}") {
			t.Errorf("no provisioning script uses ${%s}", v)
		}
		if !strings.Contains(check, "${"+v+"}") {
			t.Errorf("kubelet-labs-check does not check ${%s}", v)
		}
	}
	for _, tool := range []string{"GO", "KIND", "KUBECTL"} {
		if !strings.Contains(scripts.String(), "labs_fetch ") || !strings.Contains(scripts.String(), `"$(labs_sha256 `+tool+`)"`) {
			t.Errorf("no provisioning script downloads with labs_fetch and the %s sha256", tool)
		}
	}
}

// TestVMYAMLProvisionOrder: pins and helpers are written first (Lima writes
// every `data` file before it runs any script), the last step checks it all
// as the user and leaves the mark the readiness probe waits for.
func TestVMYAMLProvisionOrder(t *testing.T) {
	raw := rawVM(t)
	for _, path := range []string{pinsPath, libPath, checkPath} {
		dataFile(t, raw, path)
	}
	var last limayaml.Provision
	for _, p := range raw.Provision {
		if p.Mode != limayaml.ProvisionModeData {
			if !strings.HasPrefix(p.Script, "#!/bin/bash\n") {
				t.Errorf("provision script does not start with #!/bin/bash: %.60q", p.Script)
			}
			last = p
		}
	}
	if last.Mode != limayaml.ProvisionModeUser || !strings.Contains(last.Script, "\nkubelet-labs-check\n") || !strings.Contains(last.Script, markPath) {
		t.Errorf("the last provision step must be mode: user, run kubelet-labs-check and touch %s; it is %s:\n%s", markPath, last.Mode, last.Script)
	}
	if len(raw.Probes) != 1 || !strings.Contains(raw.Probes[0].Script, markPath) || raw.Probes[0].Hint == "" {
		t.Errorf("want one readiness probe that waits for %s, with a hint", markPath)
	}
}

// TestVMYAMLTemplates: Lima expands provisioning scripts and data files as Go
// templates, and an expansion that fails at run time leaves an EMPTY script
// without an error (limayaml.executeGuestTemplate): nothing in them may look
// like a template except {{.User}}, and after Load each must be the text as
// written with {{.User}} replaced.
func TestVMYAMLTemplates(t *testing.T) {
	raw := rawVM(t)
	y := loadVM(t, limayaml.X8664)
	if len(y.Provision) != len(raw.Provision) {
		t.Fatalf("%d provision steps after Load, %d written", len(y.Provision), len(raw.Provision))
	}
	for i, p := range raw.Provision {
		text, got := p.Script, y.Provision[i].Script
		if p.Mode == limayaml.ProvisionModeData {
			text, got = *p.Content, *y.Provision[i].Content
		}
		if rest := strings.ReplaceAll(text, "{{.User}}", ""); strings.Contains(rest, "{{") || strings.Contains(rest, "}}") {
			t.Errorf("provision[%d] contains a template other than {{.User}}", i)
		}
		if want := strings.ReplaceAll(text, "{{.User}}", *y.User.Name); got != want || got == "" {
			t.Errorf("provision[%d] after Lima's template expansion differs from what vm.yaml says", i)
		}
	}

	// The message is a template over the instance (limactl shows it after start).
	tmpl, err := template.New("message").Parse(raw.Message)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, map[string]any{"Name": instanceName}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"limactl shell " + instanceName, "kind create cluster --config yaml/kind-config.yaml", "export KUBECONFIG=", "docs/vm.md"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("message does not say %q:\n%s", s, out.String())
		}
	}
}

func ptrString(p *string) string {
	if p == nil {
		return "<unset>"
	}
	return *p
}
