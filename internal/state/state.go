// Package state locates the run-time state folder shared by every lab:
// generated PKI, kubeconfigs, logs, sockets and built binaries.
//
// The folder is `.labs/` at the repository root (ignored by git) unless the
// LABS_STATE_DIR environment variable names another one. Nothing in it is
// ever committed; `rm -rf .labs` (or `make clean`) removes all of it.
package state

import (
	"errors"
	"fmt"
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
// message that names it instead of deep inside a component.
func Ensure(elem ...string) (string, error) {
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
