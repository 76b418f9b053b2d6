package fakecri

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A container has no root filesystem, but `cat` can still read what a
// container would see that the runtime itself makes up or mounts:
//
//	/etc/hostname  /etc/hosts  /etc/resolv.conf  (from the sandbox config)
//	/proc/self/environ  /proc/1/environ          (the container's env)
//	any file under a Mount's container_path      (read from its host_path)
//
// The mounts are what the kubelet bind-mounts — service account tokens,
// ConfigMaps, Secrets, /dev/termination-log — so `kubectl exec … cat
// /var/run/secrets/kubernetes.io/serviceaccount/namespace` shows the real
// file. Reads never leave the mount's host directory, symlinks included,
// even one swapped in while the read runs (readUnder).

const maxFileRead = 16 << 20 // the same 16 MiB cap CRI puts on ExecSync output

var errNoSuchFile = errors.New("No such file or directory")

// containerFS answers file reads for one container.
type containerFS struct {
	workDir  string
	hostname string
	ip       string
	dns      *runtimeapi.DNSConfig
	env      []string
	mounts   []*runtimeapi.Mount // longest container_path first
}

func newContainerFS(c *container, sb *sandbox) *containerFS {
	fs := &containerFS{
		workDir:  c.workDir(),
		hostname: sb.hostname(),
		ip:       sb.ip,
		dns:      sb.config.GetDnsConfig(),
		env:      c.env(sb),
		mounts:   append([]*runtimeapi.Mount(nil), c.config.GetMounts()...),
	}
	sort.SliceStable(fs.mounts, func(i, j int) bool {
		return len(fs.mounts[i].ContainerPath) > len(fs.mounts[j].ContainerPath)
	})
	return fs
}

func (fs *containerFS) read(name string) ([]byte, error) {
	if !path.IsAbs(name) {
		name = path.Join(fs.workDir, name)
	}
	name = path.Clean(name)
	// Mounts shadow the made-up files, as a bind mount over /etc/hosts
	// (which the kubelet does for non-host-network pods) would.
	for _, m := range fs.mounts {
		cp := path.Clean(m.ContainerPath)
		if name == cp || strings.HasPrefix(name, strings.TrimSuffix(cp, "/")+"/") {
			return readUnder(m.HostPath, strings.TrimPrefix(name, cp))
		}
	}
	switch name {
	case "/etc/hostname":
		return []byte(fs.hostname + "\n"), nil
	case "/etc/hosts":
		s := "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
		if fs.ip != "" {
			s += fmt.Sprintf("%s\t%s\n", fs.ip, fs.hostname)
		}
		return []byte(s), nil
	case "/etc/resolv.conf":
		var b strings.Builder
		if fs.dns != nil {
			if len(fs.dns.Searches) > 0 {
				fmt.Fprintf(&b, "search %s\n", strings.Join(fs.dns.Searches, " "))
			}
			for _, s := range fs.dns.Servers {
				fmt.Fprintf(&b, "nameserver %s\n", s)
			}
			if len(fs.dns.Options) > 0 {
				fmt.Fprintf(&b, "options %s\n", strings.Join(fs.dns.Options, " "))
			}
		}
		return []byte(b.String()), nil
	case "/proc/self/environ", "/proc/1/environ":
		return []byte(strings.Join(fs.env, "\x00") + "\x00"), nil
	}
	return nil, errNoSuchFile
}

// readUnder reads rel inside root without letting "..", or a symlink,
// lead out of root. The open itself is confined to root (os.OpenRoot and
// Root.Open, Go 1.24+: openat2 with RESOLVE_BENEATH on Linux, else a walk
// one component at a time that checks every symlink). Resolving the path
// first and opening it after, as this did before, leaves a moment in
// which a folder checked as inside is swapped for a symlink to outside —
// and whoever writes a volume (the container) can swap it.
//
// rel "" is the mount itself, which may be one file (the kubelet mounts
// /dev/termination-log that way); its host path is the kubelet's, not the
// container's, so it is opened as given. O_NONBLOCK: a FIFO planted in a
// volume must not hang the read (it is refused below, as not a file).
func readUnder(root, rel string) ([]byte, error) {
	rel = strings.TrimPrefix(path.Clean("/"+rel), "/")
	var f *os.File
	var err error
	if rel == "" {
		f, err = os.OpenFile(root, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	} else {
		var r *os.Root
		if r, err = os.OpenRoot(root); err != nil {
			return nil, errNoSuchFile
		}
		defer r.Close()
		f, err = r.OpenFile(filepath.FromSlash(rel), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	}
	if err != nil {
		return nil, errNoSuchFile
	}
	defer f.Close()
	st, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case st.IsDir():
		return nil, errors.New("Is a directory")
	case !st.Mode().IsRegular():
		return nil, errors.New("Not a regular file")
	}
	return io.ReadAll(io.LimitReader(f, maxFileRead))
}
