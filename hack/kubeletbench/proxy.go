package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// The CRI calls a kubelet makes are counted on the runtime's side of it:
// a proxy on a socket of its own, which the kubelet is given as its
// runtime endpoint, forwards every call — unary or streaming, whatever
// its service — to the runtime's real socket and counts it by its full
// method name. The same proxy stands in front of containerd and of the
// mock, for both kubelets, so all four columns are counted one way, and
// neither kubelet is changed or asked (the mock's own call observer,
// fakecri.WithCallObserver, exists; containerd has nothing like it).

// maxMsgSize is the kubelet's CRI client's (k8s.io/cri-client
// pkg/utils.go:27, v0.36.3): a
// ListContainers of many containers must pass the proxy as it passes
// without it.
const maxMsgSize = 16 << 20

// frame is one gRPC message, passed on as bytes: the proxy never decodes.
type frame struct{ b []byte }

// rawCodec hands frames through unchanged, in both directions.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("proxy: cannot marshal %T", v)
	}
	return f.b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("proxy: cannot unmarshal into %T", v)
	}
	f.b = append(f.b[:0], data...)
	return nil
}

func (rawCodec) Name() string { return "proto" } // the name the kubelet's client sends

// proxy is a counting CRI proxy.
type proxy struct {
	socket  string
	backend *grpc.ClientConn
	server  *grpc.Server
	done    chan struct{}

	mu    sync.Mutex
	calls map[string]int64
}

// startProxy serves on socket (in a folder only we can enter: the socket
// is private from its first moment) and forwards to the unix socket
// target.
func startProxy(socket, target string) (*proxy, error) {
	if len(socket) > 107 {
		return nil, fmt.Errorf("proxy socket %s: longer than a unix socket path may be (107 bytes)", socket)
	}
	conn, err := grpc.NewClient("unix://"+target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize), grpc.MaxCallSendMsgSize(maxMsgSize)))
	if err != nil {
		return nil, fmt.Errorf("proxy to %s: %w", target, err)
	}
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		conn.Close()
		return nil, err
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("proxy: %w", err)
	}
	p := &proxy{socket: socket, backend: conn, done: make(chan struct{}), calls: map[string]int64{}}
	p.server = grpc.NewServer(
		grpc.ForceServerCodec(rawCodec{}),
		grpc.UnknownServiceHandler(p.forward),
		grpc.MaxRecvMsgSize(maxMsgSize), grpc.MaxSendMsgSize(maxMsgSize),
	)
	go func() {
		defer close(p.done)
		_ = p.server.Serve(ln)
	}()
	return p, nil
}

// endpoint is what the kubelet is given as its runtime.
func (p *proxy) endpoint() string { return "unix://" + p.socket }

// stop ends every call in flight (a kubelet's event stream never ends on
// its own) and removes the socket.
func (p *proxy) stop() {
	p.server.Stop()
	<-p.done
	p.backend.Close()
	os.Remove(p.socket)
}

// counts is a copy of the calls so far, by full method name.
func (p *proxy) counts() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int64, len(p.calls))
	for k, v := range p.calls {
		out[k] = v
	}
	return out
}

// forward is every call: counted, then passed on frame by frame until
// either side ends it; the runtime's status, headers and trailers go
// back as they came.
func (p *proxy) forward(_ any, in grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(in)
	if !ok {
		return errors.New("proxy: no method")
	}
	p.mu.Lock()
	p.calls[method]++
	p.mu.Unlock()

	ctx, cancel := context.WithCancel(in.Context())
	defer cancel()
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		ctx = metadata.NewOutgoingContext(ctx, md.Copy())
	}
	out, err := p.backend.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return err
	}
	// kubelet → runtime; the end of the kubelet's side is CloseSend.
	upErr := make(chan error, 1)
	go func() {
		for {
			f := &frame{}
			if err := in.RecvMsg(f); err != nil {
				if errors.Is(err, io.EOF) {
					upErr <- out.CloseSend()
					return
				}
				upErr <- err
				return
			}
			if err := out.SendMsg(f); err != nil {
				upErr <- err // the runtime's status comes with its RecvMsg below
				return
			}
		}
	}()
	// runtime → kubelet, until the runtime ends the call.
	first := true
	for {
		f := &frame{}
		err := out.RecvMsg(f)
		if first {
			first = false
			if md, herr := out.Header(); herr == nil {
				_ = in.SendHeader(md)
			}
		}
		if errors.Is(err, io.EOF) {
			in.SetTrailer(out.Trailer())
			return nil
		}
		if err != nil {
			in.SetTrailer(out.Trailer())
			return err // the runtime's status, code and message as it sent them
		}
		if err := in.SendMsg(f); err != nil {
			return err
		}
		select {
		case err := <-upErr:
			if err != nil && !errors.Is(err, io.EOF) {
				// the kubelet's side failed (it went away): end the call
				cancel()
				return err
			}
			upErr = nil
		default:
		}
	}
}

// methodCounts is a sorted listing of counts, for a run's log.
func methodCounts(c map[string]int64) string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return c[keys[i]] > c[keys[j]] || c[keys[i]] == c[keys[j]] && keys[i] < keys[j] })
	s := ""
	for _, k := range keys {
		s += fmt.Sprintf("%8d  %s\n", c[k], k)
	}
	return s
}
