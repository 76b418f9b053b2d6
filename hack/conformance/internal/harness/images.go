package harness

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"kubelet-labs/hack/conformance/internal/cachelock"
	"kubelet-labs/hack/conformance/internal/images"
	"kubelet-labs/hack/conformance/internal/ociimage"
)

// imageFormat changes when the way the images are made changes: the
// cached tars of an older format are rebuilt.
const imageFormat = "1"

// Images makes (or finds in the cache) the images named, imports them into
// the runtime's k8s.io namespace, and tags the course's pause image with
// upstream's pause name. An empty names list means every image.
func (l *Layout) Images(rt Runtime, names []string, progress io.Writer) error {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	all := len(names) == 0
	var src images.Sources
	var err error
	if src.BusyBox, err = l.BusyBox(progress); err != nil {
		return err
	}
	if all || want[images.Agnhost] || want[images.Kitten] || want[images.Nautilus] {
		if src.Agnhost, err = l.Build("agnhost", progress); err != nil {
			return err
		}
		if src.PorterDir, err = l.moduleDir("k8s.io/kubernetes"); err != nil {
			return err
		}
		src.PorterDir = filepath.Join(src.PorterDir, "test", "images", "agnhost", "porter")
	}
	if all || want[images.Nonewprivs] {
		if src.Nnp, err = l.Build("nnp", progress); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(l.ImageDir, 0o755); err != nil {
		return err
	}
	// the whole suite's images (suiteimages.go)
	suite, err := l.suiteSources(want, all, progress)
	if err != nil {
		return err
	}
	for _, spec := range images.SuiteSpecs(images.Specs(src), src, suite) {
		if !all && !want[spec.Name] {
			continue
		}
		tar, err := l.imageTar(spec, progress)
		if err != nil {
			return err
		}
		if out, err := exec.Command(rt.Ctr, "-a", rt.Sock, "-n", "k8s.io", "images", "import", tar).CombinedOutput(); err != nil {
			return fmt.Errorf("ctr images import %s: %v: %s", tar, err, out)
		}
	}
	tags := [][2]string{{rt.Env.PauseImage, images.Pause}}
	if all || want[images.Agnhost] {
		tags = append(tags, [2]string{images.Agnhost, images.AgnhostPrev})
	}
	for _, t := range tags {
		if out, err := exec.Command(rt.Ctr, "-a", rt.Sock, "-n", "k8s.io", "images", "tag", "--force", t[0], t[1]).CombinedOutput(); err != nil {
			return fmt.Errorf("ctr images tag %s %s: %v: %s", t[0], t[1], err, out)
		}
	}
	return nil
}

// imageTar is the image's tar in the cache, made if its sources changed.
func (l *Layout) imageTar(spec images.Spec, progress io.Writer) (string, error) {
	base := strings.NewReplacer("/", "_", ":", "_").Replace(spec.Name)
	tar := filepath.Join(l.ImageDir, base+".tar")
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", imageFormat, spec.Name)
	for _, f := range spec.Inputs {
		fi, err := os.Stat(f)
		if err != nil {
			continue // the image that needs it says so
		}
		fmt.Fprintf(h, "%s %d %d\n", f, fi.Size(), fi.ModTime().UnixNano())
	}
	key := hex.EncodeToString(h.Sum(nil))
	if built(tar, key) {
		return tar, nil
	}
	unlock, err := cachelock.Hold(tar)
	if err != nil {
		return "", err
	}
	defer unlock()
	if built(tar, key) {
		return tar, nil
	}
	start := time.Now()
	im, err := spec.Build()
	if err != nil {
		return "", err
	}
	if err := ociimage.Write(im, tar); err != nil {
		return "", err
	}
	fmt.Fprintf(progress, "made image %s in %s\n", spec.Name, time.Since(start).Round(10*time.Millisecond))
	return tar, os.WriteFile(tar+".key", []byte(key), 0o644)
}

// moduleDir is where the Go module cache holds module mod of the nested module's graph.
func (l *Layout) moduleDir(mod string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", mod)
	cmd.Dir = l.Module
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("go list -m %s: %s", mod, ee.Stderr)
		}
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}
