package envcheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsMatchVM: docs/vm.md and its Chinese version name the versions
// vm.yaml pins, the commands that work with these files, and show exactly
// what kubelet-labs-check prints; their relative links exist.
func TestDocsMatchVM(t *testing.T) {
	p := pins(t, rawVM(t))
	image := p["KIND_NODE_IMAGE"]
	tag := image[strings.LastIndex(image, ":")+1:]

	// What kubelet-labs-check really prints on an arm64 VM with the pinned tools.
	s := newSandbox(t)
	fakeTools(t, s, p, "aarch64", "arm64")
	out, err := s.run(t, `exec "$1"`, s.check)
	if err != nil {
		t.Fatalf("kubelet-labs-check: %v\n%s", err, out)
	}

	for _, doc := range []string{"docs/vm.md", "docs/vm.zh-CN.md"} {
		text := string(readRepoFile(t, doc))
		for _, want := range []string{
			p["KIND_VERSION"], p["KUBECTL_VERSION"], p["GO_VERSION"], p["DOCKER_VERSION"], tag,
			"limactl start --name=kubelet-labs vm.yaml",
			"limactl shell kubelet-labs",
			"kind create cluster --config yaml/kind-config.yaml",
			"make kind-image",
			// §3 keeps kind's DaemonSets on the node the config labels
			`kubectl -n kube-system patch daemonset kindnet --type merge -p '{"spec":{"template":{"spec":{"nodeSelector":{"kubelet-labs/kind-node":"true"}}}}}'`,
			`kubectl -n kube-system patch daemonset kube-proxy --type merge -p '{"spec":{"template":{"spec":{"nodeSelector":{"kubelet-labs/kind-node":"true"}}}}}'`,
			"export KUBECONFIG=$HOME/.kube/config",
			"docker cp kind-control-plane:/etc/kubernetes/pki/ca.crt",
			"sudo scripts/containerd-up.sh",
			"cd hack/envcheck && go test ./...",
		} {
			if !strings.Contains(text, want) {
				t.Errorf("%s does not mention %q", doc, want)
			}
		}
		if !strings.Contains(text, out) {
			t.Errorf("%s does not show kubelet-labs-check's output as it is:\n%s", doc, out)
		}
		checkLinks(t, doc, text)
	}
	checkLinks(t, "docs/README.md", string(readRepoFile(t, "docs/README.md")))
}

func checkLinks(t *testing.T, doc, text string) {
	t.Helper()
	for _, m := range regexp.MustCompile(`\]\(([^)#]+)\)`).FindAllStringSubmatch(text, -1) {
		link := m[1]
		if strings.Contains(link, "://") {
			continue
		}
		path := filepath.Join(repoRoot(t), filepath.Dir(doc), link)
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s links to %s, which does not exist", doc, link)
		}
	}
}
