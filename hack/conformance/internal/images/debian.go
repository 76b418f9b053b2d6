package images

// Images of the whole [Conformance] suite whose upstream is a Linux
// distribution's package (nginx, dig): made from Debian 12 (bookworm)
// packages, the distribution of this machine's mirror, at pinned versions
// with pinned sha256 digests, so another machine makes the same image or
// says which package it could not get. Only the programs the specs run go
// in, with the shared libraries their ELF headers name (looked up in the
// unpacked packages, not on this machine, so the host's libraries do not
// leak in), on top of the busybox image for the shell the specs' commands
// need. IMAGES.md lists which spec runs what.

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"kubelet-labs/hack/conformance/internal/cachelock"

	"kubelet-labs/hack/conformance/internal/ociimage"
)

// Deb is one Debian 12 package at a pinned version; SHA256 is its .deb's
// digest as the mirror's Packages index lists it (`apt-cache show
// NAME=VERSION`).
type Deb struct{ Name, Version, SHA256 string }

// The packages, pinned. A pin the mirror no longer carries (security
// updates replace versions) fails with apt's message naming it: update
// Version and SHA256 together from `apt-cache show NAME`.
var (
	// libc6 carries the loader and the C library every program below loads.
	debLibc6   = Deb{"libc6", "2.36-9+deb12u14", "ba4f88f73dbc3ae9055f3c20f4523bfdbaf1ad13ff95e258924f77d20b4fbedf"}
	debLibssl3 = Deb{"libssl3", "3.0.22-1~deb12u2", "cb4784740daa9b3b0eaea2b444bbefa686794afbbf3d678d238c1fd9875f2efd"}
	debZlib    = Deb{"zlib1g", "1:1.2.13.dfsg-1", "d7dd1d1411fedf27f5e27650a6eff20ef294077b568f4c8c5e51466dc7c08ce4"}
	// libc-bin is getent, which the DNS specs run for /etc/hosts entries.
	debLibcBin = Deb{"libc-bin", "2.36-9+deb12u14", "e667401af91fad95f15b3ebd25d1abd8373fd18b00dc32219678413170544e84"}

	// NginxDebs: Debian's nginx (1.22, upstream's image is 1.15 on Alpine;
	// the specs only need a web server on port 80 and a shell).
	NginxDebs = []Deb{
		{"nginx", "1.22.1-9+deb12u11", "4e2778e675c07d0f2d8d3b6f5ff84f6483ade1d82c21c910eb9a2787e1cf1b1a"},
		{"nginx-common", "1.22.1-9+deb12u11", "8ef1715ff5a9764fb5f810116acee417f4e092032212b6e4f392e8d2cd6b0952"},
		debLibc6,
		{"libcrypt1", "1:4.4.33-2", "f5f60a5cdfd4e4eaa9438ade5078a57741a7a78d659fcb0c701204f523e8bd29"},
		{"libpcre2-8-0", "10.42-1+deb12u2", "d2f7edfcc7689b9e0761c2742cc824ac86a20768bc5e8057818dc6875291fe76"},
		debLibssl3, debZlib,
	}

	// DNSToolDebs: dig and nslookup (bind9-dnsutils, what upstream's
	// glibc-dns-testing installs as "dnsutils") and getent; and OpenBSD's
	// netcat, which upstream's agnhost installs (test/images/agnhost/
	// Dockerfile:46, netcat-openbsd): the Service specs run
	// `nc -v -t -w 2 HOST PORT`, and busybox's nc has no -t.
	DNSToolDebs = []Deb{
		{"netcat-openbsd", "1.219-1", "85adebc045f48eb9a91515202a49940a0a57eff790223402333253ff121dfbdd"},
		{"bind9-dnsutils", "1:9.18.49-1~deb12u3", "b233212daebef9f7018c229d69c57973caf60318b92a19383835f651e0bd3944"},
		{"bind9-libs", "1:9.18.49-1~deb12u3", "3e496836d0e07863551c2d3429d7124c4cf30dec4ef071740b26ce3a428b49da"},
		debLibc6, debLibcBin, debLibssl3, debZlib,
		// the libraries of bind9's (krb5, libxml2 with ICU: 35 MB of the
		// image's 58, as in upstream's Debian-based image)
		{"libbsd0", "0.11.7-2", "bb31cc8b40f962a85b2cec970f7f79cc704a1ae4bad24257a822055404b2c60b"},
		{"libcom-err2", "1.47.0-2+b2", "a2bac7015e78fbc0c504df3e441f3a22292f1d2d77f9ccda760057f3690e22f2"},
		{"libedit2", "3.1-20221030-2", "1cf14abf2716d3279db12d0657a5737cf70074a1e71d3bdf73206625e3c89ce6"},
		{"libfstrm0", "0.6.1-1", "ea7226a3d435b98d79696952c69b06bd0bf503b4c7a7e3f77f971ce1d0f8a799"},
		{"libgcc-s1", "12.2.0-14+deb12u1", "3016e62cb4b7cd8038822870601f5ed131befe942774d0f745622cc77d8a88f7"},
		{"libgssapi-krb5-2", "1.20.1-2+deb12u5", "d8b87aea91b956b416c01a28c44ff6228315ae3b73de40acddac3dc5043607d2"},
		{"libicu72", "72.1-3+deb12u1", "f7f6f99c6d7b025914df2447fc93e11d22c44c0c8bdd8b6f36691c9e7ddcef88"},
		{"libidn2-0", "2.3.3-1+b1", "d50716d5824083d667427817d506b45d3f59dc77e1ca52de000f3f62d4918afa"},
		{"libjemalloc2", "5.3.0-1", "a4117c23c5c8acf6c9678a6cb086f000b79476369da7efe8a78a70826956ad3d"},
		{"libjson-c5", "0.16-2", "d0e1ed8637d1c26b9720f6057d6355f18378bba5cc2553e459d1632783c00d70"},
		{"libk5crypto3", "1.20.1-2+deb12u5", "7b6e47d15c5c9cdcd456137533d8308aeba608a54cec73b28bd59bfc4b54cf06"},
		{"libkeyutils1", "1.6.3-2", "cfac89e6a7a54ff3c6a4f843310e25efeddaa771baeae470bd98bd588c373563"},
		{"libkrb5-3", "1.20.1-2+deb12u5", "c90801be09701af221b54dd502a59cb378b7284ff31e480738baca317d2f7653"},
		{"libkrb5support0", "1.20.1-2+deb12u5", "8b9c05f2d8d461a10d657b118f572af5bf8fd6c8f93dcef81e852c5ab0f428ab"},
		{"liblmdb0", "0.9.24-1", "126d5d9d645dbe4e60c63c55160f3db31372bc7f6351d8b4480a51b40c551ff6"},
		{"liblzma5", "5.4.1-1+deb12u2", "3d8c29c8c21ec6007635e1b2591edf98b771c9572a085968f47452b33040f384"},
		{"libmaxminddb0", "1.7.1-1", "78f4bf04567160dc2f8704a0a766bbda9241b5cf8b3d557c9442c51dac803707"},
		{"libmd0", "1.0.4-2", "03539fd30c509e27101d13a56e52eda9062bdf1aefe337c07ab56def25a13eab"},
		{"libnghttp2-14", "1.52.0-1+deb12u3", "5a5736cee57e51c1baed869979e6ecdbc6495e939e33203d6cfe3b6e5a149e3f"},
		{"libprotobuf-c1", "1.4.1-1+b1", "e99b3091938bfbd55b24e95587b868ba735e38e4adbcb9942c6993f2de3ba1bf"},
		{"libstdc++6", "12.2.0-14+deb12u1", "5cd3171216d4ab0fc911cfe9c35509bf2dd8f47761c43b7f6a4296701551a24d"},
		{"libtinfo6", "6.4-4", "072d908f38f51090ca28ca5afa3b46b2957dc61fe35094c0b851426859a49a51"},
		{"libunistring2", "1.0-2", "d466bbfe011d764d793c1d9d777cad9c7cf65b938e11598f27408171ad95a951"},
		{"libuv1", "1.44.2-1+deb12u1", "204f0e13354b44e6d19317887a53dab6f26696e8d95838db970b81f2a393f7fd"},
		{"libxml2", "2.9.14+dfsg-1.3~deb12u6", "4460e39dda10a815881374217cde08474747cfa018358cd8612c14b390eff53b"},
	}
)

// DebRoot is packages unpacked each into its folder (dpkg-deb -x): the
// files of an image are looked up in them, first folder first.
type DebRoot []string

// FetchDebs returns debs unpacked in cache (<state>/conformance/debian):
// each .deb downloaded once with `apt-get download NAME=VERSION`, refused
// unless its sha256 is the pinned one, unpacked once with dpkg-deb -x.
func FetchDebs(cache string, debs []Deb, progress io.Writer) (DebRoot, error) {
	var root DebRoot
	for _, d := range debs {
		dir, err := fetchDeb(cache, d, progress)
		if err != nil {
			return nil, err
		}
		root = append(root, dir)
	}
	return root, nil
}

// DebTools says why Debian packages cannot be fetched here ("" when they can).
func DebTools() string {
	for _, t := range []string{"apt-get", "dpkg-deb"} {
		if _, err := exec.LookPath(t); err != nil {
			return t + " not found: the nginx, glibc-dns-testing images are made from Debian 12 packages"
		}
	}
	return ""
}

func fetchDeb(cache string, d Deb, progress io.Writer) (string, error) {
	if d.SHA256 == "" {
		return "", fmt.Errorf("package %s=%s has no pinned sha256", d.Name, d.Version)
	}
	id := d.Name + "_" + d.SHA256[:16]
	dir := filepath.Join(cache, "root", id)
	if _, err := os.Stat(filepath.Join(dir, ".unpacked")); err == nil {
		return dir, nil
	}
	// another process may be fetching the same package into this cache
	// (go test runs test binaries side by side): one at a time
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	unlock, err := cachelock.Hold(dir)
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(filepath.Join(dir, ".unpacked")); err == nil {
		return dir, nil
	}
	debs := filepath.Join(cache, "debs")
	deb := filepath.Join(debs, id+".deb")
	if CheckSHA256(deb, d.SHA256) != nil {
		if err := os.MkdirAll(debs, 0o755); err != nil {
			return "", err
		}
		tmp, err := os.MkdirTemp(debs, "get-")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(tmp)
		fmt.Fprintf(progress, "apt-get download %s=%s\n", d.Name, d.Version)
		cmd := exec.Command("apt-get", "download", d.Name+"="+d.Version)
		cmd.Dir = tmp
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("apt-get download %s=%s: %v: %s", d.Name, d.Version, err, lastLine(out))
		}
		got, _ := filepath.Glob(filepath.Join(tmp, d.Name+"_*.deb"))
		if len(got) != 1 {
			return "", fmt.Errorf("apt-get download %s=%s left %d .deb files, want 1", d.Name, d.Version, len(got))
		}
		if err := CheckSHA256(got[0], d.SHA256); err != nil {
			return "", fmt.Errorf("package %s=%s: %w", d.Name, d.Version, err)
		}
		if err := os.Rename(got[0], deb); err != nil {
			return "", err
		}
	}
	os.RemoveAll(dir)
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", err
	}
	if out, err := exec.Command("dpkg-deb", "-x", deb, tmp).CombinedOutput(); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("dpkg-deb -x %s: %v: %s", deb, err, lastLine(out))
	}
	if err := os.WriteFile(filepath.Join(tmp, ".unpacked"), nil, 0o644); err != nil {
		return "", err
	}
	return dir, os.Rename(tmp, dir)
}

// CheckSHA256 is nil when file's sha256 is want (hex), else an error
// naming both: what is downloaded once and built from is pinned.
func CheckSHA256(file, want string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("%s: sha256 %s, want the pinned %s", filepath.Base(file), got, want)
	}
	return nil
}

func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

// libDirs are where Debian's loader finds libraries without an
// ld.so.cache (the image has none): its multiarch folders, then the
// classic ones.
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/lib", "/usr/lib"}

// find is the unpacked folder that holds the image path p ("" if none).
func (r DebRoot) find(p string) (string, os.FileInfo) {
	for _, dir := range r {
		if fi, err := os.Lstat(filepath.Join(dir, p)); err == nil {
			return dir, fi
		}
	}
	return "", nil
}

// Closure is the entries for the image paths progs, each with what it
// needs to run: the targets of its symbolic links and, for an ELF
// program, its loader and the shared libraries its DT_NEEDED entries
// name, found in the packages (the error names a library none ships).
func (r DebRoot) Closure(progs ...string) ([]ociimage.Entry, error) {
	var entries []ociimage.Entry
	seen := map[string]bool{}
	queue := append([]string(nil), progs...)
	for len(queue) > 0 {
		p := path.Clean(queue[0])
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		dir, fi := r.find(p)
		if fi == nil {
			return nil, fmt.Errorf("%s is in none of the packages %s", p, r.names())
		}
		src := filepath.Join(dir, p)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(src)
			if err != nil {
				return nil, err
			}
			entries = append(entries, ociimage.Entry{Path: p, Link: target})
			if !path.IsAbs(target) {
				target = path.Join(path.Dir(p), target)
			}
			queue = append(queue, target)
		case fi.Mode().IsRegular():
			entries = append(entries, ociimage.Entry{Path: p, Src: src, Mode: fi.Mode().Perm() | fi.Mode()&(os.ModeSetuid|os.ModeSetgid)})
			needs, err := elfNeeds(src)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			for _, lib := range needs {
				if path.IsAbs(lib) {
					queue = append(queue, lib)
					continue
				}
				found := ""
				for _, ld := range libDirs {
					if _, fi := r.find(path.Join(ld, lib)); fi != nil {
						found = path.Join(ld, lib)
						break
					}
				}
				if found == "" {
					return nil, fmt.Errorf("%s needs %s, which none of the packages %s ships: add its package", p, lib, r.names())
				}
				queue = append(queue, found)
			}
		default:
			return nil, fmt.Errorf("%s in %s is neither a file nor a symbolic link", p, dir)
		}
	}
	return entries, nil
}

// File is the entry of one file of the packages (a configuration file
// the program reads), without following anything.
func (r DebRoot) File(p string) (ociimage.Entry, error) {
	dir, fi := r.find(p)
	if fi == nil || !fi.Mode().IsRegular() {
		return ociimage.Entry{}, fmt.Errorf("%s is not a file of the packages %s", p, r.names())
	}
	return ociimage.Entry{Path: p, Src: filepath.Join(dir, p), Mode: fi.Mode().Perm()}, nil
}

func (r DebRoot) names() string {
	var n []string
	for _, d := range r {
		b := filepath.Base(d)
		if i := strings.LastIndex(b, "_"); i > 0 {
			b = b[:i]
		}
		n = append(n, b)
	}
	return "(" + strings.Join(n, " ") + ")"
}

// elfNeeds is an ELF file's loader (PT_INTERP) and DT_NEEDED libraries;
// nothing for a file that is not ELF (a script, data).
func elfNeeds(file string) ([]string, error) {
	f, err := elf.Open(file)
	if err != nil {
		var fe *elf.FormatError
		if errors.As(err, &fe) {
			return nil, nil
		}
		return nil, err
	}
	defer f.Close()
	var needs []string
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(p.Open())
			if err != nil {
				return nil, err
			}
			needs = append(needs, string(bytes.TrimRight(b, "\x00")))
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil && f.Type == elf.ET_DYN {
		return nil, err
	}
	return append(needs, libs...), nil
}

// withEntries is im with more entries; an entry whose path im already has
// is left out (im's own file wins: agnhost's C library stays the one it
// was linked with).
func withEntries(im ociimage.Image, more []ociimage.Entry) ociimage.Image {
	have := map[string]bool{}
	for _, e := range im.Entries {
		have[path.Clean(e.Path)] = true
	}
	for _, e := range more {
		if !have[path.Clean(e.Path)] {
			im.Entries = append(im.Entries, e)
			have[path.Clean(e.Path)] = true
		}
	}
	return im
}
