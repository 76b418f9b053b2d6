package images

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kubelet-labs/hack/conformance/internal/ociimage"
)

// layoutTar writes a small one-file image the way the course's pause.tar
// is made (an OCI layout in a tar) and returns its path.
func layoutTar(t *testing.T) string {
	t.Helper()
	tar := filepath.Join(t.TempDir(), "pause.tar")
	im := ociimage.Image{Name: "localhost/kubelet-labs/pause:1.0", Entrypoint: []string{"/pause"},
		Entries: []ociimage.Entry{{Path: "/pause", Data: []byte("not really pause"), Mode: 0o755}}}
	if err := ociimage.Write(im, tar); err != nil {
		t.Fatal(err)
	}
	return tar
}

func TestRegistryEntriesFollowTheFakeRegistryLayout(t *testing.T) {
	e, err := registryEntries(layoutTar(t))
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string][]byte{}
	for _, x := range e {
		byPath[x.Path] = x.Data
	}
	// registryserver.go:121-135: the tag file holds the digest (trimmed)
	tag, ok := byPath["/var/registry/pause/manifests/testing"]
	if !ok {
		t.Fatalf("no tag file /var/registry/pause/manifests/testing in %d entries", len(e))
	}
	hash, ok := strings.CutPrefix(strings.TrimSpace(string(tag)), "sha256:")
	if !ok {
		t.Fatalf("tag file: %q, want sha256:<hash>", tag)
	}
	manifest, ok := byPath["/var/registry/pause/manifests/sha256/"+hash[:2]+"/"+hash+"/data"]
	if !ok {
		t.Fatalf("no manifest data for the tag's digest %s", hash)
	}
	if s := sha256.Sum256(manifest); hex.EncodeToString(s[:]) != hash {
		t.Errorf("the manifest's data does not hash to the tag's digest")
	}
	var man struct {
		MediaType string
		Config    struct{ Digest string }
		Layers    []struct{ Digest string }
	}
	if err := json.Unmarshal(manifest, &man); err != nil {
		t.Fatal(err)
	}
	// registryserver.go:146-152 sends it as the Content-Type
	if man.MediaType != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("manifest mediaType %q", man.MediaType)
	}
	for _, d := range append([]string{man.Config.Digest}, man.Layers[0].Digest) {
		h := strings.TrimPrefix(d, "sha256:")
		if _, ok := byPath["/var/registry/pause/blobs/sha256/"+h[:2]+"/"+h+"/data"]; !ok {
			t.Errorf("no blob %s in the registry", d)
		}
	}
	if len(e) != 4 {
		t.Errorf("%d entries, want the tag, the manifest, the config and the layer", len(e))
	}

	// the same tar gives the same entries (the image cache relies on it)
	again, err := registryEntries(layoutTar(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := range e {
		if e[i].Path != again[i].Path || !bytes.Equal(e[i].Data, again[i].Data) {
			t.Errorf("entry %d differs between two builds: %s vs %s", i, e[i].Path, again[i].Path)
		}
	}
}

func TestRegistryEntriesRejectBadLayouts(t *testing.T) {
	dir := t.TempDir()
	notTar := filepath.Join(dir, "x.tar")
	if err := os.WriteFile(notTar, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, file := range map[string]string{
		"missing": filepath.Join(dir, "absent.tar"),
		"not tar": notTar,
	} {
		_, err := registryEntries(file)
		if err == nil || !strings.Contains(err.Error(), "the fake registry's pause image "+file) {
			t.Errorf("%s: %v, want an error naming %s", name, err, file)
		}
	}
	// a blob that does not match its digest
	files, err := readLayout(layoutTar(t))
	if err != nil {
		t.Fatal(err)
	}
	for p, b := range files {
		if strings.HasPrefix(p, "blobs/") && len(b) > 1000 { // the layer
			files[p] = append(b[:len(b):len(b)], 0)
		}
	}
	if _, err := storeImage(files); err == nil || !strings.Contains(err.Error(), "does not match its digest") {
		t.Errorf("a damaged layer: %v, want a digest mismatch", err)
	}
}
