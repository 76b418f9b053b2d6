package images

import (
	"fmt"
	"os"
	"path/filepath"

	"kubelet-labs/hack/conformance/internal/ociimage"
)

// The cluster add-ons' images, under the names kubeadm v1.36.3 gives them
// (cmd/kubeadm/app/images/images.go; constants.go:372 for CoreDNS), which
// the full cluster's manifests (harness/addons.go) run.
const (
	KubeProxy = "registry.k8s.io/kube-proxy:v1.36.3"
	CoreDNS   = "registry.k8s.io/coredns/coredns:v1.14.2"
)

// ClusterSources are the programs of the add-on images; "" skips one.
type ClusterSources struct {
	KubeProxy, CoreDNS string
}

// xtablesDir is where Debian's iptables keeps its extensions (libxt_*.so),
// the folder it was built to load them from.
const xtablesDir = "/usr/lib/x86_64-linux-gnu/xtables"

// ClusterSpecs are the add-on images src can make.
func ClusterSpecs(src ClusterSources) []Spec {
	var specs []Spec
	if src.KubeProxy != "" {
		specs = append(specs, Spec{KubeProxy, []string{src.KubeProxy, "/usr/sbin/xtables-nft-multi", "/usr/sbin/xtables-legacy-multi"}, func() (ociimage.Image, error) { return kubeProxyImage(src.KubeProxy) }})
	}
	if src.CoreDNS != "" {
		specs = append(specs, Spec{CoreDNS, []string{src.CoreDNS}, func() (ociimage.Image, error) { return coreDNSImage(src.CoreDNS) }})
	}
	return specs
}

// kubeProxyImage is upstream's kube-proxy image (build/server-image/
// Dockerfile: the binary at /usr/local/bin/kube-proxy, on
// distroless-iptables) made of this host's Debian iptables: the binary
// the host's own `iptables` is (nf_tables or legacy: kube-proxy's rules
// must live where the host's other rules do; upstream's image asks the
// same question with its iptables-wrapper), every extension with the
// libraries each loads, and the iptables/ip6tables names kube-proxy runs.
func kubeProxyImage(kubeProxy string) (ociimage.Image, error) {
	multi, err := filepath.EvalSymlinks("/usr/sbin/iptables")
	if err != nil {
		return ociimage.Image{}, fmt.Errorf("kube-proxy image: this host's iptables: %w (apt-get install iptables)", err)
	}
	base := filepath.Base(multi)
	if base != "xtables-nft-multi" && base != "xtables-legacy-multi" {
		return ociimage.Image{}, fmt.Errorf("kube-proxy image: /usr/sbin/iptables is %s, want Debian's xtables-nft-multi or xtables-legacy-multi", multi)
	}
	im := ociimage.Image{Name: KubeProxy, Entrypoint: []string{"/usr/local/bin/kube-proxy"}}
	im.Entries = append(im.Entries, distrolessBase()...)
	im.Entries = append(im.Entries,
		ociimage.Entry{Path: "/usr/local/bin/kube-proxy", Src: kubeProxy, Mode: 0o755},
		ociimage.Entry{Path: "/run", Dir: true},
	)
	programs := []string{kubeProxy, multi}
	exts, err := filepath.Glob(filepath.Join(xtablesDir, "*.so"))
	if err != nil || len(exts) == 0 {
		return im, fmt.Errorf("kube-proxy image: no iptables extensions in %s", xtablesDir)
	}
	programs = append(programs, exts...)
	seen := map[string]bool{kubeProxy: true}
	for _, p := range programs {
		files, err := withLibraries(p)
		if err != nil {
			return im, fmt.Errorf("kube-proxy image: %w", err)
		}
		for _, f := range files {
			if !seen[f] {
				seen[f] = true
				im.Entries = append(im.Entries, ociimage.Entry{Path: f, Src: f, Mode: 0o755})
			}
		}
	}
	for _, name := range []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"} {
		im.Entries = append(im.Entries, ociimage.Entry{Path: "/usr/sbin/" + name, Link: base})
	}
	// protocol names of rules (-p tcp) are looked up there first
	if _, err := os.Stat("/etc/protocols"); err == nil {
		im.Entries = append(im.Entries, ociimage.Entry{Path: "/etc/protocols", Src: "/etc/protocols", Mode: 0o644})
	}
	return im, nil
}

// coreDNSImage is CoreDNS's image (github.com/coredns/coredns@v1.14.2
// Dockerfile: /coredns, ENTRYPOINT ["/coredns"]) from a static build.
// Upstream's runs as nonroot with a file capability to bind :53; a layer
// of ours carries no extended attributes, so it runs as root with only
// NET_BIND_SERVICE, which kubeadm's Deployment leaves it (as kind's node
// image of this course does: scripts/kind/component-images.sh).
func coreDNSImage(coreDNS string) (ociimage.Image, error) {
	if dynamic(coreDNS) {
		return ociimage.Image{}, fmt.Errorf("%s is linked dynamically: the CoreDNS image needs a static build", coreDNS)
	}
	im := ociimage.Image{Name: CoreDNS, Entrypoint: []string{"/coredns"}}
	im.Entries = append(distrolessBase(), ociimage.Entry{Path: "/coredns", Src: coreDNS, Mode: 0o755})
	return im, nil
}

// distrolessBase is what a distroless image gives a program: users and
// groups, the resolver's order, /tmp, and this host's CA bundle.
func distrolessBase() []ociimage.Entry {
	e := []ociimage.Entry{
		{Path: "/etc", Dir: true}, {Path: "/root", Dir: true, Mode: 0o700},
		{Path: "/home/nonroot", Dir: true, UID: 65532, GID: 65532},
		{Path: "/tmp", Dir: true, Mode: 0o777 | os.ModeSticky},
		{Path: "/etc/passwd", Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{Path: "/etc/group", Data: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		{Path: "/etc/nsswitch.conf", Data: []byte("hosts: files dns\n")},
	}
	if ca := "/etc/ssl/certs/ca-certificates.crt"; fileExists(ca) {
		e = append(e, ociimage.Entry{Path: ca, Src: ca, Mode: 0o644})
	}
	return e
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
