package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// CheckRootSafe refuses, when this process runs as root, a path that a
// user other than root could have changed: root must not read a manifest,
// key or kubeconfig, nor run a binary, from a folder another user can write
// — any process of that user could plant a symlink or a static pod there and
// so become root. Every existing component of path must belong to root and
// not be writable by group or others, except a folder above path that is
// sticky (like /tmp: others cannot rename or remove root's entries in it);
// a symlink must be root's and lead to a path that passes the same check.
// As anyone else it returns nil: the labs run as the learner (README, "Root,
// once"), and a learner's own files are theirs to trust.
func CheckRootSafe(path string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if err := rootSafe(abs, abs, 0); err != nil {
		return fmt.Errorf("running as root: %w; root must not trust what another user could have written: run the labs as yourself (only `sudo scripts/containerd-up.sh` needs root), or point %s at a folder only root can write", err, EnvVar)
	}
	return nil
}

// rootSafe walks path from / down; want is the path the caller named (only
// it may not be sticky-writable).
func rootSafe(path, want string, links int) error {
	if links > 16 {
		return fmt.Errorf("%s: too many symbolic links", want)
	}
	parts := strings.Split(strings.TrimPrefix(filepath.Clean(path), "/"), "/")
	cur := "/"
	for i := -1; i < len(parts); i++ {
		if i >= 0 {
			if parts[i] == "" {
				continue
			}
			cur = filepath.Join(cur, parts[i])
		}
		fi, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			// root creates the rest; under a file that fails, and the
			// caller's mkdir says so in its own words
			return nil
		}
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no owner to check", cur)
		}
		if st.Uid != 0 {
			return fmt.Errorf("%s belongs to uid %d, not root", cur, st.Uid)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := filepath.EvalSymlinks(cur)
			if err != nil {
				return err
			}
			return rootSafe(filepath.Join(append([]string{target}, parts[i+1:]...)...), want, links+1)
		}
		last := i == len(parts)-1
		if fi.Mode().Perm()&0o022 != 0 && (last || fi.Mode()&fs.ModeSticky == 0) {
			return fmt.Errorf("%s is writable by users other than root (mode %o)", cur, fi.Mode().Perm())
		}
	}
	return nil
}
