// Package noderuntime opens the container runtime a lab's node runs its
// pods on: one of the course's containerd instances (started by
// scripts/containerd-up.sh) or the mock CRI (mylib/fakecri) in the lab's
// own process. The node labs (14, 17, 18) share it so that --runtime means
// the same everywhere and a missing runtime fails the same way: before the
// node joins, with what to run.
package noderuntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"kubelet-labs/internal/state"
	"kubelet-labs/mycore/cri"
	"kubelet-labs/mylib/fakecri"
)

// Kinds of runtime. A containerd kind with a flavour names that instance;
// plain "containerd" is the one containerd-up.sh named first (its default
// env file), or CONTAINER_RUNTIME_ENDPOINT.
const (
	Containerd = "containerd"
	Mock       = "mock"
)

// The mock's images carry the names of the course's containerd images, so
// one pod manifest runs on both.
const (
	MockPauseImage   = "localhost/kubelet-labs/pause:1.0"
	MockBusyboxImage = "localhost/kubelet-labs/busybox:1.35.0"
)

// Kinds lists every --runtime value, for flag help and errors.
func Kinds() []string {
	k := []string{Containerd}
	for _, f := range cri.Flavours() {
		k = append(k, Containerd+"-"+f)
	}
	return append(k, Mock)
}

// Options say which runtime to open.
type Options struct {
	// Kind: "containerd", "containerd-2.2", "containerd-1.6" or "mock".
	Kind string
	// Endpoint overrides where containerd listens (containerd kinds only).
	Endpoint string
	// PodLogsDir overrides where container logs go (default: containerd's
	// POD_LOG_DIR; with the mock, pod-logs/ in NodeDir).
	PodLogsDir string
	// NodeDir is the node's state folder: the mock's socket lives there.
	NodeDir string
	// Mock options added to the mock's own (its image names above).
	Mock []fakecri.Option
}

// Runtime is an open runtime. Close it when the node is gone.
type Runtime struct {
	CRI *cri.Client
	// Kind as asked, and Name as the runtime says (e.g. "containerd v2.2.9").
	Kind, Name string
	// PodLogsDir is where container logs go (the kubelet's /var/log/pods).
	PodLogsDir string
	// Describe is one line for the lab's output.
	Describe string
	// Crictl is a command line that reaches this runtime.
	Crictl string
	// Mock is the mock CRI server, nil on containerd.
	Mock  *fakecri.Server
	close func()
}

// Close disconnects (and stops the mock).
func (r *Runtime) Close() { r.close() }

// Open connects to the runtime o names, and checks it can run pods.
func Open(ctx context.Context, o Options) (*Runtime, error) {
	if o.Kind == Mock {
		return openMock(ctx, o)
	}
	flavour, ok := strings.CutPrefix(o.Kind, Containerd)
	if !ok || (flavour != "" && !strings.HasPrefix(flavour, "-")) {
		return nil, fmt.Errorf("--runtime %q: want one of %s (containerd is started by %s and needs root; mock runs in this process)",
			o.Kind, strings.Join(Kinds(), ", "), cri.UpHint)
	}
	return openContainerd(ctx, o, strings.TrimPrefix(flavour, "-"))
}

func openContainerd(ctx context.Context, o Options, flavour string) (*Runtime, error) {
	var env cri.Env
	var err error
	up := cri.UpHint
	if flavour == "" {
		env, err = cri.Load()
	} else {
		env, err = cri.LoadFlavour(flavour)
		up = fmt.Sprintf("sudo scripts/containerd-up.sh --version %s", flavour)
	}
	if err != nil {
		return nil, err
	}
	if o.Endpoint != "" {
		env.Endpoint = cri.NormalizeEndpoint(o.Endpoint)
	}
	if o.PodLogsDir != "" {
		env.PodLogDir = o.PodLogsDir
	}
	crc, err := cri.Dial(ctx, env.Endpoint)
	if err != nil {
		// The dial error already says how to start the default flavour.
		if flavour != "" {
			return nil, fmt.Errorf("%w\n(this version: %s; or run with --runtime mock)", err, up)
		}
		return nil, fmt.Errorf("%w\n(or run with --runtime mock)", err)
	}
	info, err := crc.Info(ctx)
	if err != nil {
		crc.Close()
		return nil, err
	}
	if !info.Ready("NetworkReady") {
		crc.Close()
		return nil, fmt.Errorf("%s is up but its pod network is not ready (no CNI config?): restart it with %s", env.Endpoint, up)
	}
	crictl := "sudo " + crictlPath() + " --runtime-endpoint " + env.Endpoint
	if env.File != "" && o.Endpoint == "" {
		crictl = "sudo " + crictlPath() + " --config " + filepath.Join(filepath.Dir(env.File), "crictl.yaml")
	}
	name := info.RuntimeName + " " + info.RuntimeVersion
	return &Runtime{CRI: crc, Kind: o.Kind, Name: name, PodLogsDir: env.PodLogDir, Crictl: crictl,
		Describe: fmt.Sprintf("%s on %s; container logs under %s", name, env.Endpoint, env.PodLogDir),
		close:    func() { crc.Close() }}, nil
}

func openMock(ctx context.Context, o Options) (*Runtime, error) {
	if o.NodeDir == "" {
		return nil, fmt.Errorf("noderuntime: the mock needs the node's folder for its socket")
	}
	opts := append([]fakecri.Option{fakecri.WithPauseImage(MockPauseImage), fakecri.WithImages(MockBusyboxImage)}, o.Mock...)
	mock, err := fakecri.Start(filepath.Join(o.NodeDir, "mockcri.sock"), opts...)
	if err != nil {
		return nil, err
	}
	crc, err := cri.Dial(ctx, mock.Endpoint())
	if err != nil {
		mock.Stop()
		return nil, err
	}
	logs := o.PodLogsDir
	if logs == "" {
		logs = filepath.Join(o.NodeDir, "pod-logs")
	}
	if err := os.MkdirAll(logs, 0o755); err != nil {
		crc.Close()
		mock.Stop()
		return nil, err
	}
	return &Runtime{CRI: crc, Kind: Mock, Name: "the mock CRI", PodLogsDir: logs, Mock: mock,
		Crictl:   crictlPath() + " --runtime-endpoint " + mock.Endpoint(),
		Describe: fmt.Sprintf("the mock CRI (mylib/fakecri) in this process on %s; container logs under %s", mock.Endpoint(), logs),
		close:    func() { crc.Close(); mock.Stop() }}, nil
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
