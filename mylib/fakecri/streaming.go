package fakecri

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// Exec, Attach and PortForward do not stream over gRPC: they return a URL
// of the runtime's streaming server, which the client (crictl, or the
// kubelet proxying `kubectl exec`) then dials with SPDY or WebSockets.
// We use the very server package the kubelet and containerd use,
// k8s.io/cri-streaming/pkg/streaming (split out of the kubelet in 1.36),
// and plug the mock shell in through its Runtime interface.
//
// The server listens on 127.0.0.1 only: it has no authentication (the
// one-time URL token is the only guard), exactly like containerd's.

type streamingServer struct {
	server streaming.Server
	http   *http.Server
	addr   string
}

// StreamingAddr returns the streaming server's host:port, starting it if
// needed.
func (r *Runtime) StreamingAddr() (string, error) {
	s, err := r.streamingServer()
	if err != nil {
		return "", err
	}
	return s.addr, nil
}

// streamingServer starts the server on first use. We listen ourselves and
// pass the real address as BaseURL instead of calling Server.Start: Start
// would fill in the port only after listening, racing with GetExec.
func (r *Runtime) streamingServer() (*streamingServer, error) {
	r.streamMu.Lock()
	defer r.streamMu.Unlock()
	if r.streaming != nil {
		return r.streaming, nil
	}
	r.mu.RLock()
	closed := r.closed
	r.mu.RUnlock()
	if closed {
		return nil, status.Error(codes.Unavailable, "runtime is shut down")
	}
	host, _, err := net.SplitHostPort(r.opts.streamingAddr)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "streaming address %q: %v", r.opts.streamingAddr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, status.Errorf(codes.Internal, "streaming address %q is not a loopback address; refusing to serve unauthenticated exec on the network", r.opts.streamingAddr)
	}
	ln, err := net.Listen("tcp", r.opts.streamingAddr)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "streaming server: %v", err)
	}
	cfg := streaming.DefaultConfig
	cfg.Addr = ln.Addr().String()
	cfg.BaseURL = &url.URL{Scheme: "http", Host: ln.Addr().String()}
	// Idle exec sessions are not worth keeping for the default 4 h in a lab.
	cfg.StreamIdleTimeout = 30 * time.Minute
	srv, err := streaming.NewServer(cfg, streamRuntime{r})
	if err != nil {
		ln.Close()
		return nil, status.Errorf(codes.Internal, "streaming server: %v", err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln) // returns http.ErrServerClosed on stop
	r.streaming = &streamingServer{server: srv, http: hs, addr: cfg.Addr}
	return r.streaming, nil
}

func (s *streamingServer) stop() { s.http.Close() }

// runningContainer checks that id names a running container.
func (r *Runtime) runningContainer(op, id string) (string, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	full, err := resolveID(r.containers, "container", id)
	if err != nil {
		return "", err
	}
	if st := r.containers[full].state; st != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return "", status.Errorf(codes.FailedPrecondition, "%s: container %q is in %s state, not running", op, full, st)
	}
	return full, nil
}

// Exec returns the URL of a streaming exec session.
func (r *Runtime) Exec(_ context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if len(req.GetCmd()) == 0 {
		return nil, status.Errorf(codes.InvalidArgument, "Exec: cmd must not be empty (container %q)", req.GetContainerId())
	}
	id, err := r.runningContainer("Exec", req.GetContainerId())
	if err != nil {
		return nil, err
	}
	s, err := r.streamingServer()
	if err != nil {
		return nil, err
	}
	req = &runtimeapi.ExecRequest{ContainerId: id, Cmd: req.GetCmd(), Tty: req.GetTty(), Stdin: req.GetStdin(), Stdout: req.GetStdout(), Stderr: req.GetStderr()}
	return s.server.GetExec(req)
}

// Attach returns the URL of a streaming attach session.
func (r *Runtime) Attach(_ context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	id, err := r.runningContainer("Attach", req.GetContainerId())
	if err != nil {
		return nil, err
	}
	s, err := r.streamingServer()
	if err != nil {
		return nil, err
	}
	req = &runtimeapi.AttachRequest{ContainerId: id, Stdin: req.GetStdin(), Tty: req.GetTty(), Stdout: req.GetStdout(), Stderr: req.GetStderr()}
	return s.server.GetAttach(req)
}

// PortForward returns the URL of a port-forward session to a ready sandbox.
func (r *Runtime) PortForward(_ context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	r.mu.RLock()
	id, err := resolveID(r.sandboxes, "pod sandbox", req.GetPodSandboxId())
	if err == nil && r.sandboxes[id].state != runtimeapi.PodSandboxState_SANDBOX_READY {
		err = status.Errorf(codes.FailedPrecondition, "PortForward: pod sandbox %q is not ready", id)
	}
	r.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	s, err := r.streamingServer()
	if err != nil {
		return nil, err
	}
	return s.server.GetPortForward(&runtimeapi.PortForwardRequest{PodSandboxId: id, Port: req.GetPort()})
}

// streamRuntime adapts Runtime to streaming.Runtime.
type streamRuntime struct{ r *Runtime }

func (s streamRuntime) Exec(ctx context.Context, id string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommandserver.TerminalSize) error {
	stop := drainResize(resize)
	defer stop()
	var stdout, stderr io.Writer
	if out != nil {
		stdout = out
	}
	if errw != nil {
		stderr = errw
	} else if stdout == nil {
		stderr = io.Discard
	}
	code, err := s.r.execIn(ctx, id, cmd, in, stdout, stderr, tty)
	if err != nil {
		return err
	}
	if code != 0 {
		// The streaming server turns a CodeExitError into the
		// NonZeroExitCode status that crictl and kubectl exit with.
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", code), Code: int(code)}
	}
	return nil
}

// Attach streams the container's output from now until it exits. The mock
// has no process to feed stdin to, so stdin is read and discarded.
func (s streamRuntime) Attach(ctx context.Context, id string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommandserver.TerminalSize) error {
	stop := drainResize(resize)
	defer stop()
	r := s.r
	r.mu.RLock()
	if err := r.checkOpen(); err != nil {
		r.mu.RUnlock()
		return err
	}
	full, err := resolveID(r.containers, "container", id)
	if err != nil {
		r.mu.RUnlock()
		return err
	}
	c := r.containers[full]
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.mu.RUnlock()
		return status.Errorf(codes.FailedPrecondition, "attach: container %q is not running", full)
	}
	cio := c.io
	r.sessions.Add(1)
	r.mu.RUnlock()
	defer r.sessions.Done()

	sub := cio.subscribe()
	if sub == nil {
		return nil // exited meanwhile: nothing more to show
	}
	defer cio.unsubscribe(sub)
	if in != nil {
		go io.Copy(io.Discard, in) // ends when the stream closes
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ch, ok := <-sub.ch:
			if !ok {
				return nil
			}
			w := io.Writer(out)
			if ch.stream == runtimeapi.Stderr && errw != nil {
				w = errw
			}
			if w == nil {
				continue
			}
			if tty {
				w = &crlfWriter{w: w}
			}
			if _, err := w.Write(ch.data); err != nil {
				return nil // client went away
			}
		}
	}
}

// PortForward runs the PortForwardHook, or echoes bytes back.
func (s streamRuntime) PortForward(ctx context.Context, sandboxID string, port int32, stream io.ReadWriteCloser) error {
	r := s.r
	r.mu.RLock()
	if err := r.checkOpen(); err != nil {
		r.mu.RUnlock()
		return err
	}
	r.sessions.Add(1)
	r.mu.RUnlock()
	defer r.sessions.Done()

	// Close the stream when the runtime shuts down, so the copy ends.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var once sync.Once
	closeStream := func() { once.Do(func() { stream.Close() }) }
	defer closeStream()
	stopAfter := context.AfterFunc(r.ctx, closeStream)
	defer stopAfter()

	if h := r.opts.portForwardHook; h != nil {
		return h(ctx, sandboxID, port, stream)
	}
	// An error here only means the peer hung up or the runtime closed
	// the stream; neither is worth reporting to the streaming server.
	io.Copy(stream, stream)
	return nil
}

// drainResize consumes terminal size updates (the mock has no terminal to
// resize) so the sender never blocks.
func drainResize(resize <-chan remotecommandserver.TerminalSize) (stop func()) {
	done := make(chan struct{})
	if resize == nil {
		return func() {}
	}
	go func() {
		for {
			select {
			case _, ok := <-resize:
				if !ok {
					return
				}
			case <-done:
				return
			}
		}
	}()
	return func() { close(done) }
}
