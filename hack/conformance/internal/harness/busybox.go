package harness

import (
	"archive/tar"
	"bytes"
	"compress/bzip2"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"kubelet-labs/hack/conformance/internal/cachelock"
	"kubelet-labs/hack/conformance/internal/images"
)

// Upstream's busybox 1.37.0, the version of the e2e image
// (registry.k8s.io/e2e-test-images/busybox:1.37.0-1, built from docker's
// busybox). Debian's mirror keeps upstream's release tarball unchanged as
// its "orig" source, so it is reachable where busybox.net is not; the hash
// is busybox.net's busybox-1.37.0.tar.bz2.
//
// Why not Debian's busybox-static binary, which the labs use: Debian's ash
// drops, at start-up, every environment variable whose name is not a shell
// identifier, and four specs of the selection look for `data-1=value-1`
// in `sh -c env` (BASELINE.md); upstream's ash keeps them.
const (
	busyboxVersion = "1.37.0"
	busyboxURL     = "https://deb.debian.org/debian/pool/main/b/busybox/busybox_1.37.0.orig.tar.bz2"
	// busyboxPlainURL is the same file over http, as apt reaches the
	// mirror, for a machine that reaches it only so: the hash vouches for
	// the file either way.
	busyboxPlainURL = "http://deb.debian.org/debian/pool/main/b/busybox/busybox_1.37.0.orig.tar.bz2"
	busyboxSHA256   = "3311dff32e746499f4df0d5df04d7eb396382d7e108bb9250e7b519b837043a4"
)

// BusyBox returns a static busybox built from upstream's source with its
// default configuration, as docker's busybox image is: downloaded once
// (checked against the pinned hash), built once (two minutes of a quiet
// 2-core machine), then reused from the cache folder.
func (l *Layout) BusyBox(progress io.Writer) (string, error) {
	bin := filepath.Join(l.BinDir, "busybox-"+busyboxVersion)
	gcc, err := exec.Command("gcc", "--version").Output()
	if err != nil {
		return "", fmt.Errorf("gcc --version: %w (busybox is built from source: install gcc, make and libc6-dev)", err)
	}
	key := fmt.Sprintf("%s\nCONFIG_STATIC=y\n%s", busyboxSHA256, firstLine(gcc))
	if built(bin, key) {
		return bin, nil
	}
	if err := os.MkdirAll(l.BinDir, 0o755); err != nil {
		return "", err
	}
	// one build at a time in this cache folder; the one before may have
	// made it while this one waited
	unlock, err := cachelock.Hold(bin)
	if err != nil {
		return "", err
	}
	defer unlock()
	if built(bin, key) {
		return bin, nil
	}
	src, err := l.busyboxTarball(progress)
	if err != nil {
		return "", err
	}
	start := time.Now()
	fmt.Fprintf(progress, "building busybox %s from source (about 2 minutes)...\n", busyboxVersion)
	// A build cut short (a test's timeout) leaves its folder: gone now.
	// (No other build is under way: this one holds the lock.)
	if old, _ := filepath.Glob(filepath.Join(l.BinDir, "busybox-build-*")); len(old) > 0 {
		for _, d := range old {
			os.RemoveAll(d)
		}
	}
	work, err := os.MkdirTemp(l.BinDir, "busybox-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	if err := untarBzip2(src, work); err != nil {
		return "", fmt.Errorf("unpack %s: %w", src, err)
	}
	dir := filepath.Join(work, "busybox-"+busyboxVersion)
	jobs := fmt.Sprint(runtime.NumCPU())
	for _, step := range [][]string{
		{"make", "defconfig"},
		{"sed", "-i", "s/^# CONFIG_STATIC is not set$/CONFIG_STATIC=y/", ".config"},
		{"make", "-j" + jobs, "busybox"},
	} {
		cmd := exec.Command(step[0], step[1:]...)
		cmd.Dir = dir
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("busybox: %s: %v\n%s", strings.Join(step, " "), err, tail(out.String(), 30))
		}
	}
	if err := os.Rename(filepath.Join(dir, "busybox"), bin); err != nil {
		return "", err
	}
	fmt.Fprintf(progress, "built busybox %s in %s\n", busyboxVersion, time.Since(start).Round(time.Second))
	return bin, os.WriteFile(bin+".key", []byte(key), 0o644)
}

// built says whether bin exists and was built from what key describes.
func built(bin, key string) bool {
	old, err := os.ReadFile(bin + ".key")
	if err != nil || string(old) != key {
		return false
	}
	_, err = os.Stat(bin)
	return err == nil
}

// busyboxTarball is the source tarball in the cache folder, downloaded if
// missing; a file that does not match the pinned hash is refused.
func (l *Layout) busyboxTarball(progress io.Writer) (string, error) {
	path := filepath.Join(l.BinDir, filepath.Base(busyboxURL))
	if err := images.CheckSHA256(path, busyboxSHA256); err == nil {
		return path, nil
	}
	var errs []error
	for _, url := range []string{busyboxURL, busyboxPlainURL} {
		fmt.Fprintf(progress, "downloading %s\n", url)
		err := download(url, path+".tmp")
		if err == nil {
			err = images.CheckSHA256(path+".tmp", busyboxSHA256)
		}
		if err == nil {
			return path, os.Rename(path+".tmp", path)
		}
		os.Remove(path + ".tmp")
		errs = append(errs, err)
	}
	return "", fmt.Errorf("download busybox source: %w", errors.Join(errs...))
}

func download(url, to string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(to)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// untarBzip2 unpacks a .tar.bz2 into dir: regular files, folders and
// symbolic links, none of them outside dir.
func untarBzip2(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(bzip2.NewReader(f))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(h.Name)
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("unsafe path %q in the tarball", h.Name)
		}
		target := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o755)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(h.Linkname, target); err != nil {
				return err
			}
		}
	}
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	return s
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
