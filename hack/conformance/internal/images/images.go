// Package images makes the e2e test images the conformance selection runs,
// offline, under their exact upstream names (test/utils/image/manifest.go
// at v1.36.3, lines 211-233), from what this machine has: Go programs of
// upstream's own test/images, upstream's busybox built from source, and
// for agnhost the few tools of its Dockerfile that tests exec (bash, curl)
// with their shared libraries. suite.go adds what the rest of the
// [Conformance] suite uses (IMAGES.md lists them, and what is not made).
package images

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"kubelet-labs/hack/conformance/internal/ociimage"
)

// Upstream's names (test/utils/image/manifest.go:211-233 at v1.36.3).
const (
	Agnhost = "registry.k8s.io/e2e-test-images/agnhost:2.63.0"
	// AgnhostPrev is tagged on Agnhost: "Pods should run through the
	// lifecycle of Pods and PodStatus" only swaps one for the other.
	AgnhostPrev = "registry.k8s.io/e2e-test-images/agnhost:2.55"
	// GlibcDNSTesting is upstream's glibc image for resolver tests; the
	// selection's hostnameOverride specs only run `hostname` and
	// `hostname -f` in it, which busybox does.
	GlibcDNSTesting = "registry.k8s.io/e2e-test-images/glibc-dns-testing:2.0.0"
	BusyBox         = "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"
	Nonewprivs      = "registry.k8s.io/e2e-test-images/nonewprivs:1.4"
	NonRoot         = "registry.k8s.io/e2e-test-images/nonroot:1.5"
	// Pause is not built: the course's pause image is tagged with this name.
	Pause = "registry.k8s.io/pause:3.10.2"
)

// Sources are the programs the images are made of.
type Sources struct {
	// BusyBox is a static busybox: upstream's, built from source
	// (harness.BusyBox).
	BusyBox string
	// Agnhost and Nnp are upstream's test/images/agnhost (built with cgo,
	// its libraries are copied) and test/images/nonewprivs (static); ""
	// skips the image.
	Agnhost, Nnp string
	// PorterDir holds test/images/agnhost/porter's localhost.crt and .key.
	PorterDir string
	// Pause is the OCI-layout tar of the image agnhost's fake registry
	// serves as pause:testing (registry.go); "" means CoursePause().
	Pause string
}

// pause is the fake registry's image: Pause, else the course's.
func (s Sources) pause() string {
	if s.Pause != "" {
		return s.Pause
	}
	return CoursePause()
}

// Spec is one image to make.
type Spec struct {
	Name string
	// Inputs are the files of this machine it is made of (a cache of
	// built images compares them).
	Inputs []string
	Build  func() (ociimage.Image, error)
}

// Specs are the images src can make, BusyBox first (the cheapest).
func Specs(src Sources) []Spec {
	specs := []Spec{
		{BusyBox, []string{src.BusyBox}, func() (ociimage.Image, error) { return busyboxImage(src.BusyBox, BusyBox) }},
		{GlibcDNSTesting, []string{src.BusyBox}, func() (ociimage.Image, error) { return busyboxImage(src.BusyBox, GlibcDNSTesting) }},
		{NonRoot, []string{src.BusyBox}, func() (ociimage.Image, error) {
			// upstream: debian-base with USER 1234 (test/images/nonroot/Dockerfile)
			im, err := busyboxImage(src.BusyBox, NonRoot)
			im.User = "1234"
			return im, err
		}},
	}
	if src.Nnp != "" {
		specs = append(specs, Spec{Nonewprivs, []string{src.BusyBox, src.Nnp}, func() (ociimage.Image, error) {
			// test/images/nonewprivs/Dockerfile: nnp set-uid root in /usr/local/bin
			im, err := busyboxImage(src.BusyBox, Nonewprivs)
			im.Entries = append(im.Entries, ociimage.Entry{Path: "/usr/local/bin/nnp", Src: src.Nnp, Mode: 0o755 | os.ModeSetuid})
			im.Cmd = []string{"nnp"}
			return im, err
		}})
	}
	if src.Agnhost != "" {
		specs = append(specs, Spec{Agnhost, []string{src.BusyBox, src.Agnhost, "/bin/bash", "/usr/bin/curl", src.pause()}, func() (ociimage.Image, error) { return agnhostImage(src) }})
	}
	return specs
}

// busyboxImage is upstream's busybox image (docker's busybox: every applet
// a link in /bin) from a static busybox.
func busyboxImage(busybox, name string) (ociimage.Image, error) {
	out, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return ociimage.Image{}, fmt.Errorf("%s --list: %w", busybox, err)
	}
	if dynamic(busybox) {
		return ociimage.Image{}, fmt.Errorf("%s is linked dynamically: the images need a static busybox", busybox)
	}
	e := []ociimage.Entry{
		{Path: "/bin/busybox", Src: busybox, Mode: 0o755},
		{Path: "/tmp", Dir: true, Mode: 0o777 | os.ModeSticky},
		{Path: "/root", Dir: true, Mode: 0o700},
		{Path: "/home", Dir: true}, {Path: "/proc", Dir: true}, {Path: "/sys", Dir: true},
		{Path: "/dev", Dir: true}, {Path: "/var", Dir: true}, {Path: "/etc", Dir: true},
		// docker's busybox image's users and groups
		{Path: "/etc/passwd", Data: []byte("root:x:0:0:root:/root:/bin/sh\ndaemon:x:1:1:daemon:/usr/sbin:/bin/false\nbin:x:2:2:bin:/bin:/bin/false\nsys:x:3:3:sys:/dev:/bin/false\nsync:x:4:100:sync:/bin:/bin/sync\nmail:x:8:8:mail:/var/spool/mail:/bin/false\nwww-data:x:33:33:www-data:/var/www:/bin/false\noperator:x:37:37:Operator:/var:/bin/false\nnobody:x:65534:65534:nobody:/home:/bin/false\n")},
		{Path: "/etc/group", Data: []byte("root:x:0:\ndaemon:x:1:\nbin:x:2:\nsys:x:3:\nadm:x:4:\ntty:x:5:\ndisk:x:6:\nwheel:x:10:root\nmail:x:8:\nwww-data:x:33:\noperator:x:37:\nstaff:x:50:\nusers:x:100:\nnogroup:x:65534:\n")},
	}
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" {
			e = append(e, ociimage.Entry{Path: "/bin/" + a, Link: "busybox"})
		}
	}
	return ociimage.Image{Name: name, Cmd: []string{"sh"}, Entries: e}, nil
}

// agnhostImage follows test/images/agnhost/Dockerfile: /agnhost (and the
// agnhost-2 link the entrypoint tests run), the porter certificates,
// /uploads, the user 1000 in group 50000 a supplemental-groups test
// expects, the fake registry's content (registry.go), and of the Alpine
// packages what tests exec: a shell with the usual tools (busybox here),
// bash and curl. Not here: dig, coredns, iperf, iproute2.
func agnhostImage(src Sources) (ociimage.Image, error) {
	im, err := busyboxImage(src.BusyBox, Agnhost)
	if err != nil {
		return im, err
	}
	im.Entrypoint, im.Cmd = []string{"/agnhost"}, []string{"pause"}
	for i, e := range im.Entries {
		switch e.Path {
		case "/etc/passwd":
			im.Entries[i].Data = append(e.Data, "user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n"...)
		case "/etc/group":
			im.Entries[i].Data = append(e.Data, "user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n"...)
		}
	}
	im.Entries = append(im.Entries,
		ociimage.Entry{Path: "/agnhost", Src: src.Agnhost, Mode: 0o755},
		ociimage.Entry{Path: "/agnhost-2", Link: "agnhost"},
		ociimage.Entry{Path: "/localhost.crt", Src: filepath.Join(src.PorterDir, "localhost.crt"), Mode: 0o644},
		ociimage.Entry{Path: "/localhost.key", Src: filepath.Join(src.PorterDir, "localhost.key"), Mode: 0o644},
		ociimage.Entry{Path: "/uploads", Dir: true},
		ociimage.Entry{Path: "/home/user-defined-in-image", Dir: true, UID: 1000, GID: 1000},
	)
	reg, err := registryEntries(src.pause())
	if err != nil {
		return im, err
	}
	im.Entries = append(im.Entries, reg...)
	// agnhost is built with cgo (harness/build.go says why): its loader
	// and C library come along
	libs, err := withLibraries(src.Agnhost)
	if err != nil {
		return im, fmt.Errorf("agnhost image: %w", err)
	}
	for _, f := range libs {
		if f != src.Agnhost {
			im.Entries = append(im.Entries, ociimage.Entry{Path: f, Src: f, Mode: 0o755})
		}
	}
	for _, prog := range []string{"/bin/bash", "/usr/bin/curl"} {
		files, err := withLibraries(prog)
		if err != nil {
			return im, fmt.Errorf("agnhost image: %w", err)
		}
		for _, f := range files {
			im.Entries = append(im.Entries, ociimage.Entry{Path: f, Src: f, Mode: 0o755})
		}
	}
	return im, nil
}

func dynamic(prog string) bool {
	out, err := exec.Command("ldd", prog).CombinedOutput()
	return err == nil && !bytes.Contains(out, []byte("not a dynamic executable"))
}

var lddPath = regexp.MustCompile(`(/\S+) \(0x`)

// withLibraries is prog and every shared library ldd says it loads (with
// the dynamic loader), as paths of this machine, which the image keeps.
func withLibraries(prog string) ([]string, error) {
	out, err := exec.Command("ldd", prog).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w (is it installed?)", prog, err)
	}
	files := []string{prog}
	for _, m := range lddPath.FindAllStringSubmatch(string(out), -1) {
		// the name the loader asks for, with the file's content (Src
		// follows links)
		files = append(files, m[1])
	}
	sort.Strings(files)
	return files, nil
}
