package main

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"kubelet-labs/internal/state"
	"kubelet-labs/mycore/cri"
	"kubelet-labs/mylib/fakecri"
)

// The mock uses the image names of the course's containerd, so one pod
// manifest runs on both.
const (
	mockPauseImage   = "localhost/kubelet-labs/pause:1.0"
	mockBusyboxImage = "localhost/kubelet-labs/busybox:1.35.0"
)

// nodeRuntime is the container runtime the node runs its pods on.
type nodeRuntime struct {
	cri        *cri.Client
	podLogsDir string
	describe   string
	// crictl is the command line that reaches this runtime, for the hints.
	crictl string
	close  func()
}

// openRuntime connects to the course's containerd, or starts the mock CRI
// in this process (its socket and its containers' logs in the node's
// folder).
func openRuntime(ctx context.Context, kind, endpoint, podLogsDir, nodeDir string) (*nodeRuntime, error) {
	switch kind {
	case "containerd":
		env, err := cri.Load()
		if err != nil {
			return nil, err
		}
		if endpoint != "" {
			env.Endpoint = cri.NormalizeEndpoint(endpoint)
		}
		if podLogsDir != "" {
			env.PodLogDir = podLogsDir
		}
		crc, err := cri.Dial(ctx, env.Endpoint)
		if err != nil {
			return nil, fmt.Errorf("%w\n(start it with: %s, or run this lab with --runtime mock)", err, cri.UpHint)
		}
		info, err := crc.Info(ctx)
		if err != nil {
			crc.Close()
			return nil, err
		}
		if !info.Ready("NetworkReady") {
			crc.Close()
			return nil, fmt.Errorf("%s is up but its pod network is not ready (no CNI config?): restart it with %s", env.Endpoint, cri.UpHint)
		}
		crictl := "sudo " + crictlPath() + " --runtime-endpoint " + env.Endpoint
		if env.File != "" && endpoint == "" {
			crictl = "sudo " + crictlPath() + " --config " + filepath.Join(filepath.Dir(env.File), "crictl.yaml")
		}
		return &nodeRuntime{cri: crc, podLogsDir: env.PodLogDir, crictl: crictl,
			describe: fmt.Sprintf("%s %s on %s; container logs under %s", info.RuntimeName, info.RuntimeVersion, env.Endpoint, env.PodLogDir),
			close:    func() { crc.Close() }}, nil

	case "mock":
		tmp := &tmpFS{files: map[string]map[string]bool{}}
		mock, err := fakecri.Start(filepath.Join(nodeDir, "mockcri.sock"), fakecri.WithExecHook(tmp.exec),
			fakecri.WithPauseImage(mockPauseImage), fakecri.WithImages(mockBusyboxImage))
		if err != nil {
			return nil, err
		}
		crc, err := cri.Dial(ctx, mock.Endpoint())
		if err != nil {
			mock.Stop()
			return nil, err
		}
		if podLogsDir == "" {
			podLogsDir = filepath.Join(nodeDir, "pod-logs")
		}
		if err := os.MkdirAll(podLogsDir, 0o755); err != nil {
			crc.Close()
			mock.Stop()
			return nil, err
		}
		return &nodeRuntime{cri: crc, podLogsDir: podLogsDir, crictl: crictlPath() + " --runtime-endpoint " + mock.Endpoint(),
			describe: fmt.Sprintf("the mock CRI (mylib/fakecri) in this process on %s; container logs under %s", mock.Endpoint(), podLogsDir),
			close:    func() { crc.Close(); mock.Stop() }}, nil
	}
	return nil, fmt.Errorf("--runtime %q: want containerd (the course's, started by %s; needs root) or mock (the mock CRI, in this process)", kind, cri.UpHint)
}

// crictlPath is the course's crictl if the state folder has one, else
// whatever crictl is on the PATH.
func crictlPath() string {
	if p, err := state.Path("bin", "crictl"); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "crictl"
}

// tmpFS gives the mock's containers a /tmp. The mock runs no processes and
// has no filesystem, so exec probes like `cat /tmp/ready` could never
// change their answer. Here touch, rm, cat and test on paths under /tmp —
// exec'd by a probe or by `crictl exec` — work on a set of names per
// container; everything else goes to the mock's own shell. A new container
// (a restart) starts with an empty /tmp, as on containerd.
type tmpFS struct {
	mu    sync.Mutex
	files map[string]map[string]bool // container ID → paths that exist
}

func (f *tmpFS) exec(_ context.Context, req fakecri.ExecRequest) (int32, error) {
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
