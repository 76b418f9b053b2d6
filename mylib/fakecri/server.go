package fakecri

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
)

// maxUnixPath is the usable length of a unix socket path on Linux
// (sun_path is 108 bytes including the terminating NUL).
const maxUnixPath = 107

// maxMsgSize matches the kubelet's CRI client (cri-client/pkg/utils.go):
// 16 MiB each way, so a ListContainers of 10k containers still fits.
const maxMsgSize = 16 << 20

// Server is a Runtime served over gRPC on a unix socket, with its
// streaming server and its control API.
type Server struct {
	runtime       *Runtime
	grpc          *grpc.Server
	socket        string
	control       *http.Server
	controlSocket string
	locks         []*socketLock
	stopOnce      sync.Once
	wg            sync.WaitGroup
}

// Start serves a new Runtime on socketPath. It fails with a clear one-line
// error if the path is too long, its folder cannot be created or written,
// another starter holds the path (a flock on PATH.lock, socket.go), or a
// live server owns the socket; a socket file nobody listens on (connect:
// ECONNREFUSED), left by a crash, is replaced. The socket and the control
// socket are mode 0600 from the moment they exist.
func Start(socketPath string, opts ...Option) (*Server, error) {
	sock, lock, err := prepareSocketPath(socketPath)
	if err != nil {
		return nil, err
	}
	r := New(opts...)
	s := &Server{runtime: r, socket: sock, locks: []*socketLock{lock}}

	ln, err := listenUnix(sock)
	if err != nil {
		r.Close()
		lock.release()
		return nil, err
	}
	sopts := []grpc.ServerOption{grpc.MaxRecvMsgSize(maxMsgSize), grpc.MaxSendMsgSize(maxMsgSize)}
	if obs := r.opts.observer; obs != nil {
		sopts = append(sopts, grpc.ChainUnaryInterceptor(unaryObserver(obs)), grpc.ChainStreamInterceptor(streamObserver(obs)))
	}
	s.grpc = grpc.NewServer(sopts...)
	r.Register(s.grpc)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.grpc.Serve(ln) // returns when Stop closes the listener
	}()

	if cs := controlSocketPath(sock, r.opts.controlSocket); cs != "" {
		var clock *socketLock
		cs, clock, err = prepareSocketPath(cs)
		if err == nil {
			s.locks = append(s.locks, clock)
			var cln net.Listener
			if cln, err = listenUnix(cs); err == nil {
				s.controlSocket = cs
				s.control = &http.Server{Handler: newControlHandler(r), ReadHeaderTimeout: 10 * time.Second}
				s.wg.Add(1)
				go func() {
					defer s.wg.Done()
					s.control.Serve(cln)
				}()
			}
		}
		if err != nil {
			s.Stop()
			return nil, fmt.Errorf("control socket: %w", err)
		}
	}
	return s, nil
}

// Runtime returns the served runtime, for in-process control.
func (s *Server) Runtime() *Runtime { return s.runtime }

// Endpoint is the CRI endpoint for crictl -r or the kubelet's
// --container-runtime-endpoint: "unix:///abs/path.sock".
func (s *Server) Endpoint() string { return "unix://" + s.socket }

// SocketPath is the CRI socket's absolute path.
func (s *Server) SocketPath() string { return s.socket }

// ControlSocketPath is the control API socket ("" if disabled).
func (s *Server) ControlSocketPath() string { return s.controlSocket }

// Stop stops serving, kills all container processes, stops the streaming
// server and removes both sockets, then their lock files. It is
// idempotent.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		if s.control != nil {
			s.control.Close()
		}
		// Stop, not GracefulStop: GetContainerEvents streams never end on
		// their own, and the kubelet reconnects anyway.
		s.grpc.Stop()
		s.runtime.Close()
		s.wg.Wait()
		for _, p := range []string{s.socket, s.controlSocket} {
			if p != "" {
				if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
					fmt.Fprintf(os.Stderr, "fakecri: removing %s: %v\n", p, err)
				}
			}
		}
		for _, l := range s.locks {
			l.release()
		}
	})
}

// ControlSocketFor is where Start puts the control API for a CRI socket by
// default: "x-control.sock" next to "x.sock". Another process (lab 07
// watching lab 06's mock) finds it with this.
func ControlSocketFor(criSocket string) string { return controlSocketPath(criSocket, "") }

// controlSocketPath derives "x-control.sock" from "x.sock" unless set.
func controlSocketPath(sock, opt string) string {
	switch opt {
	case "-":
		return ""
	case "":
		return strings.TrimSuffix(sock, ".sock") + "-control.sock"
	}
	return opt
}

func unaryObserver(obs func(Call)) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := h(ctx, req)
		obs(Call{Method: path.Base(info.FullMethod), Duration: time.Since(start), Err: err})
		return resp, err
	}
}

func streamObserver(obs func(Call)) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		start := time.Now()
		err := h(srv, ss)
		obs(Call{Method: path.Base(info.FullMethod), Duration: time.Since(start), Err: err})
		return err
	}
}
