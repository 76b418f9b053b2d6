// Package state locates the run-time state folder shared by every lab:
// generated PKI, kubeconfigs, logs, sockets and built binaries.
//
// The folder is `.labs/` at the repository root (ignored by git) unless the
// LABS_STATE_DIR environment variable names another one. Nothing in it is
// ever committed; `make clean` removes all of it — only a folder that has
// the Marker file the labs put in the folders they make, so that a
// LABS_STATE_DIR=$HOME typo can never become `rm -rf $HOME`.
package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// EnvVar overrides the state folder location.
const EnvVar = "LABS_STATE_DIR"

// modulePath is this repository's module path; Root looks for its go.mod.
const modulePath = "kubelet-labs"

// Dir returns the absolute state folder. It does not create it.
func Dir() (string, error) {
	if d := os.Getenv(EnvVar); d != "" {
		return filepath.Abs(d)
	}
	root, err := Root()
	if err != nil {
		return "", fmt.Errorf("%w (or set %s to a writable folder)", err, EnvVar)
	}
	return filepath.Join(root, ".labs"), nil
}

// Path joins elem onto the state folder.
func Path(elem ...string) (string, error) {
	d, err := Dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(append([]string{d}, elem...)...), nil
}

// Ensure creates the state folder (and sub folders) with mode 0700 and
// checks that it is writable, so a read-only location fails early with a
// message that names it instead of deep inside a component. The state
// folder itself is, run as root, checked with CheckRootSafe first, then
// claimed (see claim).
func Ensure(elem ...string) (string, error) {
	top, err := Dir()
	if err != nil {
		return "", err
	}
	// root checks before it writes anything there (the marker, too)
	if err := CheckRootSafe(top); err != nil {
		return "", err
	}
	if err := claim(top); err != nil {
		return "", err
	}
	p, err := Path(elem...)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(p, 0o700); err != nil {
		return "", fmt.Errorf("state folder %s is not usable: %w (set %s to a writable folder)", p, err, EnvVar)
	}
	probe, err := os.CreateTemp(p, ".write-test-*")
	if err != nil {
		return "", fmt.Errorf("state folder %s is not writable: %w (set %s to a writable folder)", p, err, EnvVar)
	}
	probe.Close()
	os.Remove(probe.Name())
	return p, nil
}

// Root finds the repository root: the nearest parent of the working
// directory whose go.mod declares this module. `go run` and `go test` both
// run inside the repository, so this works from any lab or package folder.
func Root() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && declaresModule(string(data)) {
			return dir, nil
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		if parent := filepath.Dir(dir); parent == dir {
			return "", fmt.Errorf("cannot find the kubelet-labs repository root above %s", wd)
		}
	}
}

func declaresModule(gomod string) bool {
	for _, line := range strings.Split(gomod, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return f[1] == modulePath
		}
	}
	return false
}

// Marker is the file that makes a folder a state folder of the labs: they
// write it into the state folder they create (or find empty), and
// scripts/clean-state.sh (`make clean`) removes only a folder that has it.
const Marker = ".kubelet-labs-state"

const markerText = "This folder is a kubelet-labs state folder: `make clean` in the repository removes it with everything in it.\n"

// claim makes top the labs' state folder: it is created (0700) if missing
// and gets the Marker. A folder that exists, is not empty and has no Marker
// is refused — it is someone's folder, not ours, and `make clean` would
// delete it — except the default <repo>/.labs, which is ours by its name
// (older versions of the labs made it without a marker).
func claim(top string) error {
	marker := filepath.Join(top, Marker)
	if fi, err := os.Lstat(marker); err == nil {
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("state folder %s: %s is not a regular file; remove it", top, marker)
		}
		return nil
	}
	entries, err := os.ReadDir(top)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(top, 0o700); err != nil {
			return fmt.Errorf("state folder %s is not usable: %w (set %s to a writable folder)", top, err, EnvVar)
		}
	case err != nil:
		return fmt.Errorf("state folder %s is not usable: %w (set %s to a writable folder)", top, err, EnvVar)
	case len(entries) > 0 && !isDefault(top):
		// Another lab (or a goroutine of this one) claiming the same new
		// folder at the same time writes the marker before anything else,
		// so what we saw may be its files: look for the marker again.
		if fi, err := os.Lstat(marker); err == nil && fi.Mode().IsRegular() {
			return nil
		}
		return fmt.Errorf("state folder %s is not empty and has no %s file, so the labs did not make it: they will not fill it, nor will `make clean` delete it; set %s to a new or empty folder (or, if an older version of the labs made it, mark it: touch %s)", top, Marker, EnvVar, marker)
	}
	if err := os.WriteFile(marker, []byte(markerText), 0o600); err != nil {
		return fmt.Errorf("state folder %s is not writable: %w (set %s to a writable folder)", top, err, EnvVar)
	}
	return nil
}

// isDefault reports whether dir is <repo>/.labs.
func isDefault(dir string) bool {
	root, err := Root()
	return err == nil && filepath.Join(root, ".labs") == dir
}
