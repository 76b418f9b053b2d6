// Package ociimage writes a container image as an OCI image layout in a tar
// file: one uncompressed layer, its config, a manifest and an index whose
// io.containerd.image.name annotation names the image — what
// `ctr -n k8s.io images import FILE` reads. It is the Go form of
// scripts/containerd/build-images.sh's oci_image (DESIGN.md §4, Images),
// written in Go because the conformance images need what a shell tar cannot
// say exactly: set-uid files, files owned by other users, links by name.
// The output is reproducible: sorted entries, owner and mtime fixed, so a
// rebuild gives the same digests and a second import changes nothing.
package ociimage

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Entry is one file, folder or symbolic link of the image's only layer.
type Entry struct {
	// Path inside the image, absolute ("/bin/sh").
	Path string
	// Mode is the permission bits plus os.ModeSetuid/Setgid/Sticky; 0 means
	// 0755 for folders and programs, 0644 for data.
	Mode os.FileMode
	// UID and GID own the entry (root's by default).
	UID, GID int
	// Exactly one of: Src (a file of this machine, copied), Data (bytes),
	// Link (a symbolic link's target), Dir (a folder).
	Src  string
	Data []byte
	Link string
	Dir  bool
}

// Image is what Write puts in the layout.
type Image struct {
	// Name is the full reference, e.g. registry.k8s.io/e2e-test-images/busybox:1.37.0-1.
	Name       string
	Entrypoint []string
	Cmd        []string
	// User is the config's User ("1234", "1000:50000"); "" is root.
	User    string
	Env     []string
	Entries []Entry
}

// epoch is every entry's mtime and the image's creation time.
var epoch = time.Unix(0, 0).UTC()

// Write writes the image's OCI layout as a tar file at dest (atomically:
// a temporary file renamed into place).
func Write(im Image, dest string) error {
	layer, err := layerTar(im.Entries)
	if err != nil {
		return fmt.Errorf("%s: %w", im.Name, err)
	}
	layerDigest := digest(layer)
	env := im.Env
	if len(env) == 0 {
		env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	}
	cfg, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config": map[string]any{
			"Env": env, "Entrypoint": im.Entrypoint, "Cmd": im.Cmd, "User": im.User, "WorkingDir": "/",
		},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
		"history": []map[string]string{{"created": epoch.Format(time.RFC3339), "created_by": "kubelet-labs hack/conformance"}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        descriptor("application/vnd.oci.image.config.v1+json", cfg),
		"layers":        []any{descriptor("application/vnd.oci.image.layer.v1.tar", layer)},
	})
	if err != nil {
		return err
	}
	mdesc := descriptor("application/vnd.oci.image.manifest.v1+json", manifest)
	mdesc["platform"] = map[string]string{"architecture": runtime.GOARCH, "os": "linux"}
	tag := im.Name[strings.LastIndex(im.Name, ":")+1:]
	mdesc["annotations"] = map[string]string{"io.containerd.image.name": im.Name, "org.opencontainers.image.ref.name": tag}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests":     []any{mdesc},
	})
	if err != nil {
		return err
	}

	tmp := dest + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	tw := tar.NewWriter(f)
	files := []struct {
		name string
		data []byte
	}{
		{"blobs/sha256/" + strings.TrimPrefix(digest(cfg), "sha256:"), cfg},
		{"blobs/sha256/" + strings.TrimPrefix(layerDigest, "sha256:"), layer},
		{"blobs/sha256/" + strings.TrimPrefix(digest(manifest), "sha256:"), manifest},
		{"index.json", index},
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	for _, fl := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: fl.name, Mode: 0o644, Size: int64(len(fl.data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
		if _, err := tw.Write(fl.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dest)
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func descriptor(mediaType string, b []byte) map[string]any {
	return map[string]any{"mediaType": mediaType, "digest": digest(b), "size": len(b)}
}

// layerTar is the layer: every entry, its missing parent folders added
// (root's, 0755), sorted by path; a later entry of the same path wins.
func layerTar(entries []Entry) ([]byte, error) {
	byPath := map[string]Entry{}
	for _, e := range entries {
		p := path.Clean(e.Path)
		if !path.IsAbs(p) || p == "/" {
			return nil, fmt.Errorf("entry path %q: want an absolute path below /", e.Path)
		}
		e.Path = p
		byPath[p] = e
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := byPath[d]; !ok {
				byPath[d] = Entry{Path: d, Dir: true}
			}
		}
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		e := byPath[p]
		h := &tar.Header{Name: strings.TrimPrefix(p, "/"), Uid: e.UID, Gid: e.GID, ModTime: epoch, Format: tar.FormatPAX}
		var data []byte
		switch {
		case e.Dir:
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
			h.Mode = mode(e.Mode, 0o755)
		case e.Link != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, e.Link, 0o777
		case e.Src != "":
			b, err := os.ReadFile(e.Src)
			if err != nil {
				return nil, err
			}
			fi, err := os.Stat(e.Src)
			if err != nil {
				return nil, err
			}
			data = b
			h.Typeflag, h.Mode = tar.TypeReg, mode(e.Mode, int64(fi.Mode().Perm()))
		default:
			data = e.Data
			h.Typeflag, h.Mode = tar.TypeReg, mode(e.Mode, 0o644)
		}
		h.Size = int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := io.Copy(tw, bytes.NewReader(data)); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// mode is the tar mode of m (permission and set-id/sticky bits), def when m is 0.
func mode(m os.FileMode, def int64) int64 {
	if m == 0 {
		return def
	}
	v := int64(m.Perm())
	if m&os.ModeSetuid != 0 {
		v |= 0o4000
	}
	if m&os.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&os.ModeSticky != 0 {
		v |= 0o1000
	}
	return v
}
