package ociimage

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readTar maps a tar's entry names to their headers and contents.
func readTar(t *testing.T, r io.Reader) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	hdrs, data := map[string]*tar.Header{}, map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return hdrs, data
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		hdrs[h.Name], data[h.Name] = h, b
	}
}

// The layout holds what containerd's importer reads (index.json's name
// annotation → manifest → config and layer blobs), and the layer keeps
// what a shell tar would lose: the set-uid bit, owners, links.
func TestWriteLayout(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(dir, "img.tar")
	im := Image{Name: "registry.example/x/y:1.0", Cmd: []string{"nnp"}, User: "1234", Entries: []Entry{
		{Path: "/usr/local/bin/nnp", Src: prog, Mode: 0o755 | os.ModeSetuid},
		{Path: "/bin/sh", Link: "busybox"},
		{Path: "/home/u", Dir: true, UID: 1000, GID: 50000},
		{Path: "/etc/passwd", Data: []byte("root:x:0:0::/:/bin/sh\n")},
	}}
	if err := Write(im, dest); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(dest)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, files := readTar(t, f)

	var index struct {
		Manifests []struct {
			Digest      string
			Annotations map[string]string
		}
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Manifests) != 1 || index.Manifests[0].Annotations["io.containerd.image.name"] != im.Name {
		t.Fatalf("index.json = %s", files["index.json"])
	}
	blob := func(d string) []byte {
		b, ok := files["blobs/sha256/"+strings.TrimPrefix(d, "sha256:")]
		if !ok {
			t.Fatalf("no blob %s", d)
		}
		return b
	}
	var manifest struct {
		Config struct{ Digest string }
		Layers []struct{ Digest string }
	}
	if err := json.Unmarshal(blob(index.Manifests[0].Digest), &manifest); err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Config struct {
			User string
			Cmd  []string
		}
	}
	if err := json.Unmarshal(blob(manifest.Config.Digest), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "1234" || len(cfg.Config.Cmd) != 1 || cfg.Config.Cmd[0] != "nnp" {
		t.Errorf("config %+v", cfg.Config)
	}
	hdrs, data := readTar(t, bytes.NewReader(blob(manifest.Layers[0].Digest)))
	if h := hdrs["usr/local/bin/nnp"]; h == nil || h.Mode != 0o4755 || string(data["usr/local/bin/nnp"]) != "#!/bin/sh\n" {
		t.Errorf("nnp: %+v", h)
	}
	if h := hdrs["usr/local/bin/"]; h == nil || h.Typeflag != tar.TypeDir {
		t.Errorf("parent folder of nnp missing: %+v", h)
	}
	if h := hdrs["bin/sh"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox" {
		t.Errorf("bin/sh: %+v", h)
	}
	if h := hdrs["home/u/"]; h == nil || h.Uid != 1000 || h.Gid != 50000 {
		t.Errorf("home/u: %+v", h)
	}

	// reproducible: the same image gives the same bytes
	again := filepath.Join(dir, "again.tar")
	if err := Write(im, again); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(dest)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Error("two writes of the same image differ")
	}
}
