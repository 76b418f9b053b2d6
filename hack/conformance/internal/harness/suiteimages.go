package harness

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"kubelet-labs/hack/conformance/internal/images"
)

// suiteSources gets what the whole suite's images are made of
// (images.SuiteSpecs): the Debian packages (into <state>/conformance/debian),
// sample-apiserver built, the control plane's etcd. With every image
// wanted, a machine without apt-get makes the rest and says what it left
// out; an image asked for by name that cannot be made is an error.
func (l *Layout) suiteSources(want map[string]bool, all bool, progress io.Writer) (images.SuiteSources, error) {
	var s images.SuiteSources
	needDebs := all || want[images.Nginx] || want[images.GlibcDNSTesting] || want[images.Agnhost] || want[images.Kitten] || want[images.Nautilus]
	if needDebs {
		if why := images.DebTools(); why != "" {
			if !all && want[images.Nginx] {
				return s, fmt.Errorf("%s: %s", images.Nginx, why)
			}
			fmt.Fprintf(progress, "not making %s, and glibc-dns-testing and agnhost without dig: %s\n", images.Nginx, why)
		} else {
			cache := filepath.Join(l.Dir, "debian")
			var err error
			if all || want[images.Nginx] {
				if s.Nginx, err = images.FetchDebs(cache, images.NginxDebs, progress); err != nil {
					return s, err
				}
			}
			if s.DNSTools, err = images.FetchDebs(cache, images.DNSToolDebs, progress); err != nil {
				return s, err
			}
		}
	}
	if all || want[images.Kitten] || want[images.Nautilus] {
		dir, err := l.moduleDir("k8s.io/kubernetes")
		if err != nil {
			return s, err
		}
		s.HTMLDir = filepath.Join(dir, "test", "images")
	}
	if all || want[images.SampleAPIServer] {
		var err error
		if s.SampleAPIServer, err = l.Build("sample-apiserver", progress); err != nil {
			return s, err
		}
	}
	if all || want[images.Etcd] {
		s.Etcd = filepath.Join(l.ControlPlaneBinDir, "etcd")
		if _, err := os.Stat(s.Etcd); err != nil && all {
			// the run builds the control plane after the images
			fmt.Fprintf(progress, "not making %s: %v (lab 00's control plane is not built yet)\n", images.Etcd, err)
			s.Etcd = ""
		}
	}
	return s, nil
}
