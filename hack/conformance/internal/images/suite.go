package images

// The images the whole [Conformance] suite (446 specs) needs beyond the
// node selection's: IMAGES.md is the list, per image, of the specs that
// run it and what they run in it. SuiteSpecs makes them; it also replaces
// two images of Specs when the Debian packages are at hand:
// glibc-dns-testing (the busybox stand-in has no dig) and agnhost (gets
// dig, nslookup and getent), because the eight DNS specs run
// `dig +notcp/+tcp +noall +answer +search NAME` and `getent hosts NAME` in
// both (test/e2e/network/dns_common.go:427,430,433 at v1.36.3).

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"kubelet-labs/hack/conformance/internal/ociimage"
)

// Upstream's names (test/utils/image/manifest.go:214-225 at v1.36.3).
const (
	Nginx           = "registry.k8s.io/e2e-test-images/nginx:1.15-4"
	Kitten          = "registry.k8s.io/e2e-test-images/kitten:1.8"
	Nautilus        = "registry.k8s.io/e2e-test-images/nautilus:1.8"
	SampleAPIServer = "registry.k8s.io/e2e-test-images/sample-apiserver:1.29.2"
	Etcd            = "registry.k8s.io/etcd:3.6.8-0"
)

// EtcdVersion is the etcd of the Etcd image: the control plane's own
// (lab 00 builds 3.6.8, upstream's image's version).
const EtcdVersion = "3.6.8"

// SuiteSources are what SuiteSpecs makes images of; an empty field skips
// the images that need it.
type SuiteSources struct {
	// Nginx and DNSTools are the unpacked NginxDebs and DNSToolDebs.
	Nginx, DNSTools DebRoot
	// HTMLDir is upstream's test/images (kitten/html, nautilus/html).
	HTMLDir string
	// SampleAPIServer is k8s.io/sample-apiserver built (cgo, like agnhost).
	SampleAPIServer string
	// Etcd is the control plane's etcd binary, EtcdVersion.
	Etcd string
}

// SuiteSpecs adds the suite's images to specs (from Specs(src)) and
// replaces glibc-dns-testing and agnhost as the package comment says.
func SuiteSpecs(specs []Spec, src Sources, s SuiteSources) []Spec {
	byName := map[string]int{}
	for i, sp := range specs {
		byName[sp.Name] = i
	}
	put := func(sp Spec) {
		if i, ok := byName[sp.Name]; ok {
			specs[i] = sp
			return
		}
		byName[sp.Name] = len(specs)
		specs = append(specs, sp)
	}
	if s.DNSTools != nil {
		put(Spec{GlibcDNSTesting, append([]string{src.BusyBox}, s.DNSTools.inputs()...), func() (ociimage.Image, error) {
			return glibcDNSTestingImage(src.BusyBox, s.DNSTools)
		}})
		if i, ok := byName[Agnhost]; ok {
			base := specs[i]
			put(Spec{Agnhost, append(append([]string(nil), base.Inputs...), s.DNSTools.inputs()...), func() (ociimage.Image, error) {
				im, err := base.Build()
				if err != nil {
					return im, err
				}
				if im, err = withDNSTools(im, s.DNSTools); err != nil {
					return im, err
				}
				return withNetcat(im, s.DNSTools)
			}})
		}
	}
	if s.Nginx != nil {
		put(Spec{Nginx, append([]string{src.BusyBox}, s.Nginx.inputs()...), func() (ociimage.Image, error) {
			return nginxImage(src.BusyBox, s.Nginx)
		}})
	}
	if src.Agnhost != "" && s.HTMLDir != "" {
		for _, w := range []struct{ name, dir, jpg string }{{Kitten, "kitten", "kitten.jpg"}, {Nautilus, "nautilus", "nautilus.jpg"}} {
			put(Spec{w.name, []string{src.BusyBox, src.Agnhost, src.pause()}, func() (ociimage.Image, error) {
				return webImage(src, w.name, filepath.Join(s.HTMLDir, w.dir, "html"), w.jpg)
			}})
		}
	}
	if s.SampleAPIServer != "" {
		put(Spec{SampleAPIServer, []string{src.BusyBox, s.SampleAPIServer}, func() (ociimage.Image, error) {
			return sampleAPIServerImage(src.BusyBox, s.SampleAPIServer)
		}})
	}
	if s.Etcd != "" {
		put(Spec{Etcd, []string{s.Etcd}, func() (ociimage.Image, error) { return etcdImage(s.Etcd) }})
	}
	return specs
}

// inputs are the markers of the unpacked packages, for the image cache's key.
func (r DebRoot) inputs() []string {
	var in []string
	for _, d := range r {
		in = append(in, filepath.Join(d, ".unpacked"))
	}
	return in
}

// glibcDNSTestingImage follows test/images/glibc-dns-testing/Dockerfile
// (Debian bookworm-slim + dnsutils): dig and nslookup, getent, glibc's
// resolver, on the busybox image for `sh -c "for i in \`seq 1 600\`; do
// ...; sleep 1; done"`. Not here: the coredns binary of the Dockerfile
// (no spec of the suite runs it).
func glibcDNSTestingImage(busybox string, dns DebRoot) (ociimage.Image, error) {
	im, err := busyboxImage(busybox, GlibcDNSTesting)
	if err != nil {
		return im, err
	}
	return withDNSTools(im, dns)
}

// withDNSTools adds dig, nslookup, getent and /etc/nsswitch.conf (Debian's
// default: files before dns, which `getent hosts` of the /etc/hosts spec
// needs) to im; files im has are kept.
func withDNSTools(im ociimage.Image, dns DebRoot) (ociimage.Image, error) {
	e, err := dns.Closure("/usr/bin/dig", "/usr/bin/nslookup", "/usr/bin/getent")
	if err != nil {
		return im, fmt.Errorf("%s: %w", im.Name, err)
	}
	e = append(e, ociimage.Entry{Path: "/etc/nsswitch.conf", Data: []byte("passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n")})
	return withEntries(im, e), nil
}

// withNetcat adds OpenBSD's netcat as /usr/bin/nc, ahead of busybox's
// /bin/nc on the PATH, as agnhost's Alpine has it (/usr/bin/nc of
// netcat-openbsd).
func withNetcat(im ociimage.Image, r DebRoot) (ociimage.Image, error) {
	e, err := r.Closure("/bin/nc.openbsd")
	if err != nil {
		return im, fmt.Errorf("%s: %w", im.Name, err)
	}
	e = append(e, ociimage.Entry{Path: "/usr/bin/nc", Link: "/bin/nc.openbsd"})
	return withEntries(im, e), nil
}

// nginxImage stands for upstream's nginx:1.15-4 (nginx:1.15-alpine):
// nginx in the foreground serving /usr/share/nginx/html on port 80 with
// the official image's configuration, its logs on the container's
// stdout/stderr, and a shell: "should call prestop when killing a pod"
// runs `sh -c "while true; do echo preStop; sleep 1; done"` in it
// (test/e2e/node/pre_stop.go:233). Debian's nginx reads its compiled-in
// paths (/var/lib/nginx/*, /run/nginx.pid) before the configuration.
func nginxImage(busybox string, r DebRoot) (ociimage.Image, error) {
	im, err := busyboxImage(busybox, Nginx)
	if err != nil {
		return im, err
	}
	e, err := r.Closure("/usr/sbin/nginx")
	if err != nil {
		return im, fmt.Errorf("%s: %w", Nginx, err)
	}
	mime, err := r.File("/etc/nginx/mime.types")
	if err != nil {
		return im, fmt.Errorf("%s: %w", Nginx, err)
	}
	for i, x := range im.Entries {
		switch x.Path {
		case "/etc/passwd":
			im.Entries[i].Data = append(x.Data, "nginx:x:101:101:nginx:/var/cache/nginx:/sbin/nologin\n"...)
		case "/etc/group":
			im.Entries[i].Data = append(x.Data, "nginx:x:101:nginx\n"...)
		}
	}
	e = append(e, mime,
		ociimage.Entry{Path: "/etc/nginx/nginx.conf", Data: []byte(nginxConf)},
		ociimage.Entry{Path: "/etc/nginx/conf.d/default.conf", Data: []byte(nginxDefaultConf)},
		ociimage.Entry{Path: "/usr/share/nginx/html/index.html", Data: []byte(nginxIndex)},
		ociimage.Entry{Path: "/usr/share/nginx/html/50x.html", Data: []byte("<html><body><h1>An error occurred.</h1></body></html>\n")},
		ociimage.Entry{Path: "/var/log/nginx/access.log", Link: "/dev/stdout"},
		ociimage.Entry{Path: "/var/log/nginx/error.log", Link: "/dev/stderr"},
		ociimage.Entry{Path: "/var/lib/nginx", Dir: true},
		ociimage.Entry{Path: "/var/cache/nginx", Dir: true},
		ociimage.Entry{Path: "/run", Dir: true},
		ociimage.Entry{Path: "/var/run", Link: "/run"},
	)
	im = withEntries(im, e)
	// the official image: CMD ["nginx", "-g", "daemon off;"] (its
	// entrypoint script only runs the /docker-entrypoint.d hooks, none here)
	im.Cmd = []string{"nginx", "-g", "daemon off;"}
	return im, nil
}

// The official nginx image's configuration (nginx.conf, conf.d/default.conf)
// of the 1.15 days: listen on port 80 only.
const nginxConf = `user  nginx;
worker_processes  auto;

error_log  /var/log/nginx/error.log notice;
pid        /var/run/nginx.pid;

events {
    worker_connections  1024;
}

http {
    include       /etc/nginx/mime.types;
    default_type  application/octet-stream;
    access_log  /var/log/nginx/access.log;
    sendfile        on;
    keepalive_timeout  65;
    include /etc/nginx/conf.d/*.conf;
}
`

const nginxDefaultConf = `server {
    listen       80;
    server_name  localhost;

    location / {
        root   /usr/share/nginx/html;
        index  index.html index.htm;
    }

    error_page   500 502 503 504  /50x.html;
    location = /50x.html {
        root   /usr/share/nginx/html;
    }
}
`

const nginxIndex = `<!DOCTYPE html>
<html>
<head>
<title>Welcome to nginx!</title>
</head>
<body>
<h1>Welcome to nginx!</h1>
</body>
</html>
`

// webImage follows test/images/kitten/Dockerfile (nautilus's is the same):
// agnhost's image with html/<name>.jpg and html/data.json copied to / and
// CMD ["test-webserver"], which serves / on port 80; the update-demo specs
// GET data.json through the pod proxy and look for <name>.jpg
// (test/e2e/kubectl/kubectl.go:2439,2455), the image volume spec mounts
// kitten and cats /volume/data.json and /volume/etc/os-release, looking
// for "Alpine Linux" (test/e2e/common/node/image_volume.go:86-87). Ours is
// not Alpine and does not pretend to be: it has no /etc/os-release (that
// spec pulls with policy Always, which no registry here can serve anyway).
//
// Without the DNS tools agnhost gets here: no spec runs them in these two.
func webImage(src Sources, name, html, jpg string) (ociimage.Image, error) {
	im, err := agnhostImage(src)
	if err != nil {
		return im, err
	}
	im.Name = name
	im.Cmd = []string{"test-webserver"}
	im.Entries = append(im.Entries,
		ociimage.Entry{Path: "/" + jpg, Src: filepath.Join(html, jpg), Mode: 0o644},
		ociimage.Entry{Path: "/data.json", Src: filepath.Join(html, "data.json"), Mode: 0o644},
	)
	return im, nil
}

// sampleAPIServerImage follows test/images/sample-apiserver/Dockerfile:
// ENTRYPOINT ["/sample-apiserver"] on Alpine (busybox here). The
// aggregator spec runs it with --etcd-servers=http://127.0.0.1:2379 and
// its serving certificate from a secret, probes https :443/readyz
// (test/e2e/apimachinery/aggregator.go:254-268). Built with cgo like
// agnhost, so its loader and C library come along.
func sampleAPIServerImage(busybox, bin string) (ociimage.Image, error) {
	im, err := busyboxImage(busybox, SampleAPIServer)
	if err != nil {
		return im, err
	}
	im.Entrypoint, im.Cmd = []string{"/sample-apiserver"}, nil
	im.Entries = append(im.Entries, ociimage.Entry{Path: "/sample-apiserver", Src: bin, Mode: 0o755})
	return withHostLibraries(im, bin)
}

// etcdImage stands for registry.k8s.io/etcd:3.6.8-0: the aggregator spec
// runs `/usr/local/bin/etcd --listen-client-urls http://127.0.0.1:2379
// --advertise-client-urls ...` in it (aggregator.go:280-286), nothing
// else; etcd writes its data to default.etcd in the working folder, /.
// The binary is the control plane's (same version), with its libraries.
func etcdImage(bin string) (ociimage.Image, error) {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return ociimage.Image{}, fmt.Errorf("%s --version: %w", bin, err)
	}
	if !strings.Contains(string(out), "etcd Version: "+EtcdVersion+"\n") {
		return ociimage.Image{}, fmt.Errorf("%s is not etcd %s (%s): the %s image needs that version", bin, EtcdVersion, firstLine(out), Etcd)
	}
	im := ociimage.Image{Name: Etcd, Entries: []ociimage.Entry{
		{Path: "/usr/local/bin/etcd", Src: bin, Mode: 0o755},
		{Path: "/tmp", Dir: true, Mode: 0o777 | os.ModeSticky},
		{Path: "/var/lib/etcd", Dir: true, Mode: 0o700},
	}}
	return withHostLibraries(im, bin)
}

// withHostLibraries adds the loader and shared libraries of this machine
// that bin loads (see withLibraries).
func withHostLibraries(im ociimage.Image, bin string) (ociimage.Image, error) {
	libs, err := withLibraries(bin)
	if err != nil {
		return im, fmt.Errorf("%s: %w", im.Name, err)
	}
	for _, f := range libs {
		if f != bin {
			im.Entries = append(im.Entries, ociimage.Entry{Path: f, Src: f, Mode: 0o755})
		}
	}
	return im, nil
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	return s
}
