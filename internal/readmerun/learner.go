package readmerun

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// UserEnvVar names the unprivileged user the READMEs' commands run as when
// the tests run as root (CI): the course's root model is that only
// `sudo scripts/containerd-up.sh` runs as root, and every lab as the
// learner — so the runner types the labs' commands as a learner, not as
// root. .ci/run creates that user, gives it a copy of the Go caches, and
// starts containerd with the socket handed to it.
const UserEnvVar = "LABS_README_USER"

// learner is who the commands run as.
type learner struct {
	name     string
	uid, gid uint32
	home     string
}

// lookupLearner returns the learner named by UserEnvVar, or nil to run as
// ourselves (not root, or no user named).
func lookupLearner() (*learner, error) {
	name := os.Getenv(UserEnvVar)
	if name == "" || os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %w", UserEnvVar, name, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	if uid == 0 {
		return nil, fmt.Errorf("%s=%s is root: name an unprivileged user", UserEnvVar, name)
	}
	return &learner{name: name, uid: uint32(uid), gid: uint32(gid), home: u.HomeDir}, nil
}

// passedEnv are the variables of the runner's environment a learner's
// terminal has too: how this machine reaches the Go module proxy and the
// network, where root's tree is when it is not the default, and the test
// run's own switches (CI makes a missing runtime fail instead of skip;
// the cache mutation detector is on for every lab a test runs). Nothing
// else of root's environment reaches the learner's commands.
var passedEnv = []string{
	"GOPROXY", "GOSUMDB", "GONOSUMDB", "GOPRIVATE", "GONOPROXY", "GOINSECURE",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
	"LANG", "TZ", "LABS_ROOT_DIR", "CI", "KUBE_CACHE_MUTATION_DETECTOR",
}

// loginPath is the PATH of a learner who installed Go as go.dev says (its
// bin folder added in their profile) on a Debian machine.
func loginPath() string {
	dirs := []string{"/usr/local/bin", "/usr/bin", "/bin"}
	if goBin, err := exec.LookPath("go"); err == nil {
		if real, err := filepath.EvalSymlinks(goBin); err == nil {
			dirs = append([]string{filepath.Dir(real)}, dirs...)
		}
	}
	return strings.Join(dirs, ":")
}

// apply makes a command run as the learner, in a learner's environment: a
// login shell's variables, built here rather than filtered from root's.
func (l *learner) apply(attr *syscall.SysProcAttr) []string {
	attr.Credential = &syscall.Credential{Uid: l.uid, Gid: l.gid}
	env := []string{
		"HOME=" + l.home, "USER=" + l.name, "LOGNAME=" + l.name, "SHELL=/bin/bash",
		"PATH=" + loginPath(), "TERM=dumb", "GOFLAGS=-buildvcs=false",
	}
	for _, k := range passedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// give hands dir (and all in it) to the learner: their clone. Children
// before their folder, the folder above dir last, and never through a
// symlink (Lchown): until the top is theirs the learner cannot reach the
// tree, and once a folder is theirs nothing below it is left to change, so
// no rename or symlink of theirs can point a chown elsewhere.
func (l *learner) give(dir string) error {
	paths, err := chownOrder(dir)
	if err != nil {
		return err
	}
	for _, p := range paths {
		if err := os.Lchown(p, int(l.uid), int(l.gid)); err != nil {
			return err
		}
	}
	return nil
}

// chownOrder is every path in dir, each after everything in it, then the
// folder above dir.
func chownOrder(dir string) ([]string, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	// WalkDir lists a folder before what is in it: backwards, after
	slices.Reverse(paths)
	return append(paths, filepath.Dir(dir)), nil
}

// copyFile copies src to a new file dst with src's permissions.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
