// Package labruntime is the one way a lab opens a container runtime: one
// of the course's containerd instances (started by
// `sudo scripts/containerd-up.sh`, the env files it writes are read here) or
// the mock CRI (mylib/fakecri) in the lab's own process. Every lab that runs
// pods opens its runtime here and registers its flags here, so --runtime and
// --cri-endpoint mean the same in every lab and a missing runtime fails the
// same way: before anything else starts, with the command that fixes it.
package labruntime

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"kubelet-labs/internal/containerdenv"
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

// The images the course's containerd has (scripts/containerd-up.sh builds
// them offline); the mock is given the same names, so one pod manifest runs
// on both. The one definition of these names.
const (
	PauseImage   = containerdenv.PauseImage
	BusyboxImage = containerdenv.BusyboxImage
)

// UpHint is the one command that starts the course's containerd; it is the
// only command of the course that needs root. Open names it in the dial
// error when containerd is not there (cri.WithStartHint): the CRI client,
// a library, knows no command of the course.
const UpHint = containerdenv.UpHint

// Kinds lists every --runtime value, for flag help and errors.
func Kinds() []string {
	k := []string{Containerd}
	for _, f := range Flavours() {
		k = append(k, Containerd+"-"+f)
	}
	return append(k, Mock)
}

// Flags are the runtime flags every lab that runs pods takes.
type Flags struct {
	Kind       string // --runtime
	Endpoint   string // --cri-endpoint
	PodLogsDir string // --pod-logs-dir
}

// Register adds --runtime (default def), --cri-endpoint and --pod-logs-dir
// to fs, with the same words in every lab.
func (f *Flags) Register(fs *flag.FlagSet, def string) {
	fs.StringVar(&f.Kind, "runtime", def, "container runtime: "+strings.Join(Kinds(), ", ")+
		" (containerd: the course's, started once by "+UpHint+", the instance it named first; mock: the mock CRI of mylib/fakecri, in this process)")
	fs.StringVar(&f.Endpoint, "cri-endpoint", "", "the runtime's CRI endpoint, e.g. unix:///…/containerd.sock (default: from /var/lib/kubelet-labs/containerd/env, or $"+EndpointEnvVar+"; with --runtime mock: a mock CRI already serving there, e.g. lab 06's)")
	fs.StringVar(&f.PodLogsDir, "pod-logs-dir", "", "where container logs go, the kubelet's /var/log/pods (default: containerd's POD_LOG_DIR; pod-logs/ in the lab's state folder on the mock)")
}

// Options say which runtime to open.
type Options struct {
	Flags
	// Dir is the lab's (or node's) folder in the state folder: the mock's
	// socket and pod logs live there.
	Dir string
	// Image, if set, must be present in the runtime (default: a containerd
	// flavour's BUSYBOX_IMAGE, the mock's BusyboxImage); "-" checks none.
	Image string
	// Mock options added to the mock's own (its image names above).
	Mock []fakecri.Option
}

// Runtime is an open runtime. Close it when the lab is done.
type Runtime struct {
	CRI *cri.Client
	// Kind as asked, and Name as the runtime says (e.g. "containerd v2.2.9").
	Kind, Name string
	// PodLogsDir is where container logs go (the kubelet's /var/log/pods).
	PodLogsDir string
	// Image is the busybox image the runtime has.
	Image string
	// Describe is one line for the lab's output.
	Describe string
	// Crictl is a command line that reaches this runtime, as the learner.
	Crictl string
	// Mock is the mock CRI server when this process started it, else nil.
	Mock  *fakecri.Server
	close []func()
}

// Close disconnects (and stops the mock if it is ours).
func (r *Runtime) Close() {
	for _, f := range r.close {
		f()
	}
	r.close = nil
}

// Open connects to the runtime o names, and checks it can run pods: its pod
// network is ready and it has the image.
func Open(ctx context.Context, o Options) (*Runtime, error) {
	if o.Kind == Mock {
		return openMock(ctx, o)
	}
	flavour, ok := strings.CutPrefix(o.Kind, Containerd)
	if !ok || (flavour != "" && !strings.HasPrefix(flavour, "-")) {
		return nil, fmt.Errorf("--runtime %q: want one of %s (containerd is started once by `%s`; mock runs in this process)",
			o.Kind, strings.Join(Kinds(), ", "), UpHint)
	}
	return openContainerd(ctx, o, strings.TrimPrefix(flavour, "-"))
}

func openContainerd(ctx context.Context, o Options, flavour string) (*Runtime, error) {
	var env Env
	var err error
	up := UpHint
	if flavour == "" {
		env, err = Load()
	} else {
		env, err = LoadFlavour(flavour)
		up = UpHint + " --version " + flavour
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
	crc, err := cri.Dial(ctx, env.Endpoint, cri.WithStartHint(UpHint))
	if err != nil {
		// The dial error already says how to start the default flavour.
		if flavour != "" {
			return nil, fmt.Errorf("%w\n(this version: %s; or run with --runtime mock)", err, up)
		}
		return nil, fmt.Errorf("%w\n(or run with --runtime mock)", err)
	}
	r := &Runtime{CRI: crc, Kind: o.Kind, PodLogsDir: env.PodLogDir, Image: env.BusyboxImage,
		close: []func(){func() { _ = crc.Close() }}}
	if r.Image == "" {
		r.Image = BusyboxImage
	}
	r.Crictl = CrictlPath() + " --runtime-endpoint " + env.Endpoint
	if env.File != "" && o.Endpoint == "" {
		r.Crictl = CrictlPath() + " --config " + filepath.Join(filepath.Dir(env.File), "crictl.yaml")
	}
	if err := r.check(ctx, o.Image, up); err != nil {
		r.Close()
		return nil, err
	}
	r.Describe = fmt.Sprintf("%s on %s; container logs under %s", r.Name, env.Endpoint, r.PodLogsDir)
	return r, nil
}

func openMock(ctx context.Context, o Options) (*Runtime, error) {
	r := &Runtime{Kind: Mock, PodLogsDir: o.PodLogsDir, Image: BusyboxImage}
	endpoint := cri.NormalizeEndpoint(o.Endpoint)
	if endpoint == "" {
		// our own mock, in this process
		if o.Dir == "" {
			return nil, fmt.Errorf("labruntime: the mock needs the lab's folder for its socket")
		}
		opts := append([]fakecri.Option{fakecri.WithPauseImage(PauseImage), fakecri.WithImages(BusyboxImage)}, o.Mock...)
		mock, err := fakecri.Start(filepath.Join(o.Dir, "mockcri.sock"), opts...)
		if err != nil {
			return nil, fmt.Errorf("start the mock CRI: %w", err)
		}
		r.Mock, endpoint = mock, mock.Endpoint()
		r.close = append(r.close, mock.Stop)
	}
	// No start hint: containerd's command would not start a mock (one
	// already serving is the learner's, e.g. lab 06's).
	crc, err := cri.Dial(ctx, endpoint)
	if err != nil {
		r.Close()
		return nil, err
	}
	r.CRI = crc
	r.close = append([]func(){func() { _ = crc.Close() }}, r.close...)
	if r.PodLogsDir == "" {
		if o.Dir == "" {
			r.Close()
			return nil, fmt.Errorf("labruntime: the mock needs --pod-logs-dir or the lab's folder")
		}
		r.PodLogsDir = filepath.Join(o.Dir, "pod-logs")
	}
	if err := os.MkdirAll(r.PodLogsDir, 0o755); err != nil {
		r.Close()
		return nil, err
	}
	if err := r.check(ctx, o.Image, UpHint); err != nil {
		r.Close()
		return nil, err
	}
	r.Crictl = CrictlPath() + " --runtime-endpoint " + endpoint
	where := "in this process"
	if r.Mock == nil {
		where = "serving"
	}
	r.Describe = fmt.Sprintf("the mock CRI (mylib/fakecri) %s on %s; container logs under %s", where, endpoint, r.PodLogsDir)
	return r, nil
}

// check asks the runtime its name, and refuses one whose pod network is not
// ready or that lacks the image (image "" = r.Image, "-" = none).
func (r *Runtime) check(ctx context.Context, image, up string) error {
	info, err := r.CRI.Info(ctx)
	if err != nil {
		return err
	}
	r.Name = info.RuntimeName + " " + info.RuntimeVersion
	if !info.Ready("NetworkReady") {
		return fmt.Errorf("%s on %s is up but its pod network is not ready (no CNI config?): restart it with %s", r.Name, r.CRI.Endpoint, up)
	}
	if image == "-" {
		return nil
	}
	if image != "" {
		r.Image = image
	}
	ok, err := r.CRI.HasImage(ctx, r.Image)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s has no image %s: run %s, which imports it", r.Name, r.Image, up)
	}
	return nil
}

// CrictlPath is the course's crictl if the state folder has one (built by
// scripts/build-crictl.sh), else whatever crictl is on the PATH. Lab 11,
// which dials its endpoint itself, names it in its hints too.
func CrictlPath() string {
	if p, err := state.Path("bin", "crictl"); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "crictl"
}
