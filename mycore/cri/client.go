package cri

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	internalapi "k8s.io/cri-api/pkg/apis"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"
)

// DefaultTimeout bounds each CRI call. The kubelet's default
// (--runtime-request-timeout) is 2 minutes, sized for slow image pulls; the
// labs pull nothing and want a stuck runtime to show up quickly.
const DefaultTimeout = 30 * time.Second

// Client talks CRI v1 to one runtime endpoint through the kubelet's own
// remote client. Runtime and Images are the kubelet's interfaces
// (k8s.io/cri-api/pkg/apis) if a lab needs a call this package does not wrap;
// every call through them, as through this package's own, is counted by
// the Client's Meter.
type Client struct {
	Endpoint string
	Runtime  internalapi.RuntimeService
	Images   internalapi.ImageManagerService
	meter    *Meter
}

// withServices puts rs and is behind a new Meter, the one way into them.
func (c *Client) withServices(rs internalapi.RuntimeService, is internalapi.ImageManagerService) *Client {
	c.meter = &Meter{}
	c.Runtime, c.Images = metered{rs: rs, m: c.meter}, meteredImages{is: is, m: c.meter}
	return c
}

// Meter counts the calls made through this Client so far (nil for a
// Client built by hand, as a test's, whose calls nothing counts).
func (c *Client) Meter() *Meter { return c.meter }

type options struct {
	timeout   time.Duration
	startHint string
}

// Option changes how Dial connects.
type Option func(*options)

// WithTimeout sets the per-call timeout (RunPodSandbox gets twice this, as
// in the kubelet's client).
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithStartHint names the command that starts the runtime at endpoint
// (e.g. an installer's): a DialError for a runtime that is not there, or
// whose socket is another user's, then ends with it ("start it with: …").
// This package knows no such command — how a runtime gets started is its
// user's business — so without one the error says what is wrong, not what
// to run.
func WithStartHint(cmd string) Option { return func(o *options) { o.startHint = cmd } }

// Dial connects to endpoint ("unix:///path" or a bare socket path) and
// checks that it serves CRI v1, the way the kubelet does at start-up:
// remote.NewRemoteRuntimeService and NewRemoteImageService call Version and
// ImageFsInfo once and fail if the runtime does not answer them.
// The error explains the cause; see DialError.
func Dial(ctx context.Context, endpoint string, opts ...Option) (*Client, error) {
	o := options{timeout: DefaultTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	c := &Client{Endpoint: NormalizeEndpoint(endpoint)}

	// Look before dialing: a missing socket is the common case (containerd
	// not started) and os.Stat says so precisely and instantly.
	sock := SocketPath(c.Endpoint)
	if sock == "" {
		// The kubelet on Linux accepts only unix sockets (cri-client's
		// util.GetAddressAndDialer). CRI has no authentication of its own:
		// a socket's file permissions are its access control.
		return nil, &DialError{Endpoint: c.Endpoint, Kind: ErrNotReachable,
			Hint: fmt.Sprintf("%q is not a unix:// endpoint: CRI is served on a unix socket, whose file mode is its only access control (CRI on TCP would let anyone who reaches the port run containers as root)", c.Endpoint)}
	}
	{
		fi, err := os.Stat(sock)
		if err != nil {
			return nil, explain(c.Endpoint, err, o.startHint)
		}
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, &DialError{Endpoint: c.Endpoint, Kind: ErrNotReachable,
				Hint: fmt.Sprintf("%s exists but is not a unix socket", sock)}
		}
	}

	ctx = c.ctx(ctx)
	// nil TracerProvider: no OpenTelemetry; false: unary List calls, the
	// kubelet's default while the CRIListStreaming feature gate is off.
	rs, err := remote.NewRemoteRuntimeService(ctx, c.Endpoint, o.timeout, nil, false)
	if err != nil {
		return nil, explain(c.Endpoint, err, o.startHint)
	}
	is, err := remote.NewRemoteImageService(ctx, c.Endpoint, o.timeout, nil, false)
	if err != nil {
		_ = rs.Close(ctx)
		return nil, explain(c.Endpoint, err, o.startHint)
	}
	return c.withServices(rs, is), nil
}

// Close closes both gRPC connections.
func (c *Client) Close() error {
	ctx := c.ctx(context.Background())
	return errors.Join(c.Runtime.Close(ctx), c.Images.Close(ctx))
}

// Context returns ctx carrying the client's logger, for code that calls
// Runtime or Images directly (mycore/plegruntime does).
func (c *Client) Context(ctx context.Context) context.Context { return c.ctx(ctx) }

// ctx gives the kubelet client, which takes its logger from the context
// (klog.FromContext) on every call, one that drops everything: it logs
// every failed call at error level, and the errors this package returns
// already say what went wrong.
func (c *Client) ctx(ctx context.Context) context.Context {
	return klog.NewContext(ctx, logr.Discard())
}
