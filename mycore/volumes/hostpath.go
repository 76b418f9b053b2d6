package volumes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/volume/util/hostutil"
)

// setUpHostPath is the hostPath plugin's SetUp (pkg/volume/hostpath/
// host_path.go:241-260): the node's own path, after the type check
// (checkTypeInternal :462-499). Nothing of it is ever removed. Whether a
// pod may use hostPath at all is the apiserver's decision (Pod Security
// admission), not the node's.
func setUpHostPath(src *v1.HostPathVolumeSource) (volume, error) {
	p := filepath.Clean(src.Path)
	if !filepath.IsAbs(p) {
		return volume{}, fmt.Errorf("hostPath %q is not an absolute path", src.Path)
	}
	t := v1.HostPathUnset
	if src.Type != nil {
		t = *src.Type
	}
	if err := checkHostPathType(p, t); err != nil {
		return volume{}, err
	}
	return volume{path: p}, nil
}

func checkHostPathType(p string, t v1.HostPathType) error {
	hu := hostutil.NewHostUtil()
	exists, err := hu.PathExists(p)
	if err != nil {
		return err
	}
	is := func(want ...hostutil.FileType) bool {
		if !exists {
			return false
		}
		ft, err := hu.GetFileType(p)
		if err != nil {
			return false
		}
		for _, w := range want {
			if ft == w {
				return true
			}
		}
		return false
	}
	switch t {
	case v1.HostPathUnset:
		return nil // no check (host_path.go:253)
	case v1.HostPathDirectoryOrCreate:
		if !exists {
			return os.MkdirAll(p, 0o755) // makeDir :504
		}
		fallthrough
	case v1.HostPathDirectory:
		if !is(hostutil.FileTypeDirectory) {
			return fmt.Errorf("hostPath type check failed: %s is not a directory", p)
		}
	case v1.HostPathFileOrCreate:
		if !exists {
			return makeFile(p)
		}
		fallthrough
	case v1.HostPathFile:
		if !is(hostutil.FileTypeFile) {
			return fmt.Errorf("hostPath type check failed: %s is not a file", p)
		}
	case v1.HostPathSocket:
		if !is(hostutil.FileTypeSocket) {
			return fmt.Errorf("hostPath type check failed: %s is not a socket file", p)
		}
	case v1.HostPathCharDev:
		if !is(hostutil.FileTypeCharDev) {
			return fmt.Errorf("hostPath type check failed: %s is not a character device", p)
		}
	case v1.HostPathBlockDev:
		if !is(hostutil.FileTypeBlockDev) {
			return fmt.Errorf("hostPath type check failed: %s is not a block device", p)
		}
	default:
		return fmt.Errorf("%s is an invalid volume type", t)
	}
	return nil
}

// makeFile is host_path.go:516: an empty file, mode 0644; its folder must
// exist (upstream does not make it either).
func makeFile(p string) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if f != nil {
		return f.Close()
	}
	return nil
}
