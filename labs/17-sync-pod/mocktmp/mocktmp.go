// Package mocktmp gives the mock CRI's containers a /tmp, so lab 17's exec
// probes (`cat /tmp/ready`, `test ! -e /tmp/sick`) change their answer on
// the mock as they do on containerd when a learner runs `crictl exec … touch
// /tmp/sick`.
package mocktmp

import (
	"context"
	"fmt"
	"path"
	"strings"
	"sync"

	"kubelet-labs/mylib/fakecri"
)

// TmpFS is the /tmp of every container of one mock. The mock runs no
// processes and has no filesystem, so exec probes like `cat /tmp/ready`
// could never change their answer. Here touch, rm, cat and test on paths
// under /tmp — exec'd by a probe or by `crictl exec` — work on a set of
// names per container; everything else goes to the mock's own shell. A new
// container (a restart) starts with an empty /tmp, as on containerd.
type TmpFS struct {
	mu    sync.Mutex
	files map[string]map[string]bool // container ID → paths that exist
}

// New is an empty /tmp for every container.
func New() *TmpFS { return &TmpFS{files: map[string]map[string]bool{}} }

// Option is the mock's option that routes its exec calls here first.
func (f *TmpFS) Option() fakecri.Option { return fakecri.WithExecHook(f.exec) }

func (f *TmpFS) exec(_ context.Context, req fakecri.ExecRequest) (int32, error) {
	if len(req.Cmd) == 0 {
		return 0, fakecri.ErrNotHandled
	}
	args := req.Cmd[1:]
	inTmp := func(p string) bool { return strings.HasPrefix(path.Clean(p), "/tmp/") }
	f.mu.Lock()
	defer f.mu.Unlock()
	files := f.files[req.ContainerID]
	if files == nil {
		files = map[string]bool{}
		f.files[req.ContainerID] = files
	}
	switch path.Base(req.Cmd[0]) {
	case "touch":
		for _, p := range args {
			if !inTmp(p) {
				return 0, fakecri.ErrNotHandled
			}
		}
		for _, p := range args {
			files[path.Clean(p)] = true
		}
		return 0, nil
	case "rm":
		force := len(args) > 0 && args[0] == "-f"
		if force {
			args = args[1:]
		}
		code := int32(0)
		for _, p := range args {
			if !inTmp(p) {
				return 0, fakecri.ErrNotHandled
			}
			if !files[path.Clean(p)] && !force {
				fmt.Fprintf(req.Stderr, "rm: can't remove '%s': No such file or directory\n", p)
				code = 1
			}
			delete(files, path.Clean(p))
		}
		return code, nil
	case "cat":
		if len(args) != 1 || !inTmp(args[0]) {
			return 0, fakecri.ErrNotHandled // the mock's cat knows /etc/hostname and more
		}
		if !files[path.Clean(args[0])] {
			fmt.Fprintf(req.Stderr, "cat: can't open '%s': No such file or directory\n", args[0])
			return 1, nil
		}
		return 0, nil // our files are empty
	case "test":
		// test -e FILE, test ! -e FILE (and -f)
		not := len(args) > 0 && args[0] == "!"
		if not {
			args = args[1:]
		}
		if len(args) != 2 || (args[0] != "-e" && args[0] != "-f") || !inTmp(args[1]) {
			return 0, fakecri.ErrNotHandled
		}
		if files[path.Clean(args[1])] != not {
			return 0, nil
		}
		return 1, nil
	}
	return 0, fakecri.ErrNotHandled
}
