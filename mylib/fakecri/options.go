package fakecri

import (
	"context"
	"io"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Option configures a Runtime (and, through Start, its Server).
type Option func(*options)

// ExecRequest is what an ExecHook sees: one command run inside a container,
// either by ExecSync (Stdin empty, TTY false) or by a streaming Exec.
type ExecRequest struct {
	ContainerID string
	Cmd         []string
	TTY         bool
	Stdin       io.Reader
	Stdout      io.Writer
	Stderr      io.Writer
}

// ExecHook runs a command instead of the built-in mock shell. Return
// ErrNotHandled to fall back to the built-in commands. The context is
// cancelled on ExecSync timeout and when the container exits.
type ExecHook func(ctx context.Context, req ExecRequest) (exitCode int32, err error)

// PortForwardHook serves one forwarded connection to port of a sandbox.
// The default echoes every byte back, so `crictl port-forward` can be
// tried without any server in the "pod".
type PortForwardHook func(ctx context.Context, sandboxID string, port int32, stream io.ReadWriteCloser) error

// PullHook is consulted before an image is "pulled"; a non-nil error fails
// the pull (use status.Error to pick the gRPC code). Handy to teach
// ErrImagePull / ImagePullBackOff.
type PullHook func(ctx context.Context, ref string) error

// Call describes one finished CRI call, for WithCallObserver.
type Call struct {
	Method   string // short name, e.g. "RunPodSandbox"
	Duration time.Duration
	Err      error
}

type options struct {
	runtimeName    string
	runtimeVersion string
	pauseImage     string
	images         []string
	podCIDR        string
	cgroupDriver   runtimeapi.CgroupDriver
	handlers       []string // accepted RuntimeHandler names besides ""
	// streamingAddr is loopback only: the streaming server has no
	// authentication, exactly like containerd's.
	streamingAddr   string
	execHook        ExecHook
	portForwardHook PortForwardHook
	pullHook        PullHook
	pullDelay       time.Duration
	observer        func(Call)
	controlSocket   string // "": derived from the CRI socket (ControlSocketFor)
	now             func() time.Time
	// supplementalGroupsPolicy is what Status reports in
	// features.supplementalGroupsPolicy (WithSupplementalGroupsPolicy).
	supplementalGroupsPolicy bool
}

func defaultOptions() options {
	return options{
		runtimeName:    "fakecri",
		runtimeVersion: "v0.1.0",
		// The sandbox image a 1.36 cluster uses (kubeadm's PauseVersion).
		// Like containerd, the mock "has" it from the start and pins it.
		pauseImage:    "registry.k8s.io/pause:3.10.2",
		podCIDR:       "10.88.0.0/16", // containerd's default CNI range
		cgroupDriver:  runtimeapi.CgroupDriver_CGROUPFS,
		handlers:      []string{"runc"},
		streamingAddr: "127.0.0.1:0",
		now:           time.Now,
		// As containerd 2.x, which the course runs.
		supplementalGroupsPolicy: true,
	}
}

// WithVersion sets the runtime name and version reported by Version.
func WithVersion(name, version string) Option {
	return func(o *options) { o.runtimeName, o.runtimeVersion = name, version }
}

// WithImages preloads images (any reference crictl accepts, e.g. "busybox").
func WithImages(refs ...string) Option {
	return func(o *options) { o.images = append(o.images, refs...) }
}

// WithPauseImage changes the pinned sandbox image that is always present.
func WithPauseImage(ref string) Option { return func(o *options) { o.pauseImage = ref } }

// WithPodCIDR sets the range sandbox IPs come from (UpdateRuntimeConfig
// can change it later, as the kubelet does with the node's podCIDR).
func WithPodCIDR(cidr string) Option { return func(o *options) { o.podCIDR = cidr } }

// WithCgroupDriver sets what RuntimeConfig reports (default cgroupfs: the
// labs run without systemd).
func WithCgroupDriver(d runtimeapi.CgroupDriver) Option {
	return func(o *options) { o.cgroupDriver = d }
}

// WithExecHook installs a Go function that runs exec'd commands.
func WithExecHook(h ExecHook) Option { return func(o *options) { o.execHook = h } }

// WithPortForwardHook replaces the default echo port-forward handler.
func WithPortForwardHook(h PortForwardHook) Option {
	return func(o *options) { o.portForwardHook = h }
}

// WithPullHook installs a function that can fail image pulls.
func WithPullHook(h PullHook) Option { return func(o *options) { o.pullHook = h } }

// WithPullDelay makes every PullImage take d (the context still cancels it).
func WithPullDelay(d time.Duration) Option { return func(o *options) { o.pullDelay = d } }

// WithCallObserver is told about every CRI call served by Start's gRPC
// server; the lab uses it to print the calls crictl or the kubelet make.
func WithCallObserver(f func(Call)) Option { return func(o *options) { o.observer = f } }

// WithClock replaces time.Now (for deterministic timestamps in tests).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithSupplementalGroupsPolicy sets whether Status reports the runtime
// feature supplementalGroupsPolicy (default true, as containerd 2.x).
// false is containerd 1.6 and 1.7, whose CRI has no such field: the
// kubelet then refuses a pod asking for supplementalGroupsPolicy: Strict
// (SupplementalGroupsPolicyNotSupported) rather than let the runtime drop
// the field and merge the image's groups in.
func WithSupplementalGroupsPolicy(supported bool) Option {
	return func(o *options) { o.supplementalGroupsPolicy = supported }
}
