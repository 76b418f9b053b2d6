package images

// agnhost's fake registry content. Upstream's agnhost image carries
// /var/registry (test/images/agnhost/Dockerfile:20-29,68 at v1.36.3):
// prepare_registry.sh downloads registry.k8s.io/pause:3.10.2 with crane
// and stores it as pause:testing (fakeregistryserver/images.txt) in the
// layout `agnhost fake-registry-server` serves
// (fakeregistryserver/registryserver.go:92-156): a tag file
// <name>/manifests/<tag> holding a digest, manifests at
// <name>/manifests/sha256/<2 hex>/<hash>/data, blobs at
// <name>/blobs/sha256/<2 hex>/<hash>/data, each manifest's Content-Type
// taken from its mediaType field. The node suite's serial "Container
// Runtime blackbox test when running a container with a new image" specs
// run it with --private on the host network and pull localhost:5000/
// pause:testing, with and without a pull secret
// (test/e2e/common/node/runtime.go:261-310,
// test/e2e/framework/registry/registry.go:108-136).
//
// No registry is reachable here, so the content is the course's own pause
// image: the OCI-layout tar scripts/containerd/build-images.sh makes from
// hack/images/pause/pause.c, which containerd runs as every pod's sandbox
// (as upstream's pause:3.10.2 is). Its manifest, config and layer are
// stored byte for byte, so the pulled image is the sandbox image, digest
// and all, and the "with secret" spec's pod runs /pause.

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"

	"kubelet-labs/hack/conformance/internal/ociimage"
	"kubelet-labs/internal/labruntime"
)

const (
	// RegistryDir is the fake registry's storage in the agnhost image
	// (registryserver.go:34 hardcodes it).
	RegistryDir = "/var/registry"
	// RegistryPause is the repository and tag the specs pull from the
	// fake registry (images.txt: "pause 3.10.2 testing").
	RegistryPause = "pause:testing"
)

// CoursePause is the course's pause image, where scripts/containerd-up.sh
// leaves it (scripts/containerd/lib.sh: IMAGES_DIR="${LABS_ROOT}/images"):
// an OCI-layout tar, the sandbox image of the containerd the harness uses.
func CoursePause() string {
	return filepath.Join(labruntime.RootDir(), "images", "pause.tar")
}

// registryEntries are the fake registry's files holding the image of the
// OCI-layout tar layout as RegistryPause: its manifest for linux on this
// machine's architecture, that manifest's config and layers. Every blob is
// checked against its digest, so a damaged tar fails here, not in a pull.
func registryEntries(layout string) ([]ociimage.Entry, error) {
	files, err := readLayout(layout)
	if err != nil {
		return nil, fmt.Errorf("the fake registry's pause image %s: %w", layout, err)
	}
	e, err := storeImage(files)
	if err != nil {
		return nil, fmt.Errorf("the fake registry's pause image %s: %w (rebuild it with scripts/containerd-up.sh)", layout, err)
	}
	return e, nil
}

// readLayout is the regular files of an OCI-layout tar by clean relative
// path ("index.json", "blobs/sha256/<hash>").
func readLayout(name string) (map[string][]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("not a tar file: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		files[path.Clean(strings.TrimPrefix(h.Name, "/"))] = b
	}
}

type descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
	Platform  *struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
	} `json:"platform"`
}

const ociManifest = "application/vnd.oci.image.manifest.v1+json"

// storeImage lays the layout's image out as registryserver.go reads it.
func storeImage(files map[string][]byte) ([]ociimage.Entry, error) {
	var index struct {
		Manifests []descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		return nil, fmt.Errorf("index.json: %v", err)
	}
	var m *descriptor
	for i, d := range index.Manifests {
		if d.Platform == nil && len(index.Manifests) == 1 || d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == runtime.GOARCH {
			m = &index.Manifests[i]
			break
		}
	}
	if m == nil {
		return nil, fmt.Errorf("index.json has no manifest for linux/%s", runtime.GOARCH)
	}
	if m.MediaType != ociManifest {
		return nil, fmt.Errorf("manifest %s is a %q, want an OCI image manifest", m.Digest, m.MediaType)
	}
	manifest, err := blob(files, *m)
	if err != nil {
		return nil, err
	}
	var man struct {
		MediaType string       `json:"mediaType"`
		Config    descriptor   `json:"config"`
		Layers    []descriptor `json:"layers"`
	}
	if err := json.Unmarshal(manifest, &man); err != nil {
		return nil, fmt.Errorf("manifest %s: %v", m.Digest, err)
	}
	// the server's only Content-Type for it (registryserver.go:146-152):
	// without one containerd cannot tell what it pulled
	if man.MediaType != ociManifest {
		return nil, fmt.Errorf("manifest %s says mediaType %q, want %q", m.Digest, man.MediaType, ociManifest)
	}
	repo, tag, _ := strings.Cut(RegistryPause, ":")
	dir := path.Join(RegistryDir, repo)
	// prepare_registry.sh writes the tag file with echo: digest, newline
	e := []ociimage.Entry{
		{Path: path.Join(dir, "manifests", tag), Data: []byte(m.Digest + "\n")},
		{Path: digestPath(path.Join(dir, "manifests"), m.Digest), Data: manifest},
	}
	for _, d := range append([]descriptor{man.Config}, man.Layers...) {
		b, err := blob(files, d)
		if err != nil {
			return nil, err
		}
		e = append(e, ociimage.Entry{Path: digestPath(path.Join(dir, "blobs"), d.Digest), Data: b})
	}
	return e, nil
}

// blob is d's content in the layout, checked against d's digest and size.
func blob(files map[string][]byte, d descriptor) ([]byte, error) {
	hash, ok := strings.CutPrefix(d.Digest, "sha256:")
	if !ok || len(hash) != 64 {
		return nil, fmt.Errorf("digest %q: want sha256:<64 hex>", d.Digest)
	}
	b, ok := files["blobs/sha256/"+hash]
	if !ok {
		return nil, fmt.Errorf("no blob %s", d.Digest)
	}
	if s := sha256.Sum256(b); hex.EncodeToString(s[:]) != hash || int64(len(b)) != d.Size {
		return nil, fmt.Errorf("blob %s: content does not match its digest and size %d", d.Digest, d.Size)
	}
	return b, nil
}

// digestPath is registryserver.go:96-104's digestToPath.
func digestPath(base, digest string) string {
	algo, hash, _ := strings.Cut(digest, ":")
	return path.Join(base, algo, hash[:2], hash, "data")
}
