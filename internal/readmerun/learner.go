package readmerun

import (
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
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

// apply makes a command run as the learner, in a learner's environment.
func (l *learner) apply(attr *syscall.SysProcAttr, env []string) []string {
	attr.Credential = &syscall.Credential{Uid: l.uid, Gid: l.gid}
	var out []string
	for _, kv := range env {
		switch k, _, _ := cutEq(kv); k {
		case "HOME", "USER", "LOGNAME", "GOCACHE", "GOMODCACHE", "GOPATH", "XDG_CACHE_HOME", "TMPDIR":
			continue
		}
		out = append(out, kv)
	}
	return append(out, "HOME="+l.home, "USER="+l.name, "LOGNAME="+l.name)
}

func cutEq(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// give hands dir (and all in it) to the learner: their clone.
func (l *learner) give(dir string) error {
	if err := os.Chown(filepath.Dir(dir), int(l.uid), int(l.gid)); err != nil {
		return err
	}
	return filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(l.uid), int(l.gid))
	})
}

// linkOrCopy puts src at dst: a hard link where it can (the same file
// system), else a copy; either way a file the learner can run but not
// change.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
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
