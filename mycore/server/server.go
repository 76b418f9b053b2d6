package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/kubernetes"
	internalapi "k8s.io/cri-api/pkg/apis"

	"kubelet-labs/mycore/journal"
)

// DefaultPort is the kubelet's port (--port, 10250).
const DefaultPort = 10250

// WebSocketsFeature is the feature a node declares in
// status.declaredFeatures when its server speaks WebSockets itself. Only
// then does the apiserver pass kubectl's WebSocket v5 stream through to
// the node; otherwise it translates it to SPDY on the way
// (pkg/registry/core/pod/rest/subresources.go:190-231, checkNodeSupportsWebsockets :317).
const WebSocketsFeature = "ExtendWebSocketsToKubelet"

// PodLookup is what the server asks about pods: which ones this node runs.
// The kubelet's pod manager (k8s.io/kubernetes/pkg/kubelet/pod.Manager)
// implements it, and so does anything with the same two methods.
type PodLookup interface {
	GetPodByName(namespace, name string) (*v1.Pod, bool)
	GetPods() []*v1.Pod
}

// Config describes one node server.
type Config struct {
	// NodeName is the object every authorization check is about
	// (nodes/NodeName).
	NodeName string
	// Listener is where to serve, from Listen: open it before joining, so
	// the node can publish its port.
	Listener net.Listener
	// Certificate is the serving certificate (ServingCertificate).
	Certificate *tls.Certificate
	// ClientCA is a PEM bundle: every client must present a certificate
	// that chains to it. It is the cluster CA, which signed the
	// apiserver's kubelet-client certificate.
	ClientCA []byte
	// Client is the node's own client (system:node:NAME): it sends the
	// SubjectAccessReviews, which the Node authorizer lets a node create.
	Client kubernetes.Interface
	// Pods are the pods this node runs (the pod manager).
	Pods PodLookup
	// Runtime is the CRI runtime service: containers, sandboxes, streaming
	// URLs, log paths.
	Runtime internalapi.RuntimeService
	// WebSockets makes the server accept WebSocket v5 exec/attach and
	// tunneled port-forward requests and translate them to SPDY for the
	// runtime, as the kubelet does with ExtendWebSocketsToKubelet (on by
	// default in 1.36, server.go:1000-1012, 1090-1126). The node must
	// declare WebSocketsFeature for the apiserver to send them.
	WebSockets bool
	// HealthChecks are added to /healthz (ping is always there).
	HealthChecks []healthz.HealthChecker
	// AuthorizedTTL and UnauthorizedTTL are how long an allow and a deny
	// from a SubjectAccessReview are cached; 0 means the kubelet's
	// defaults, 5 minutes and 30 seconds.
	AuthorizedTTL, UnauthorizedTTL time.Duration
	// Log receives one line per request, and TLS handshakes refused
	// (nil: silent).
	Log func(format string, args ...any)
	// Journal, if set, gets the server's CRI calls about a pod — Exec,
	// Attach, PortForward — as journal.CRI entries on the pod's lane
	// of the live view, beside the runtime manager's.
	Journal *journal.Bus
}

// Server is a running node server.
type Server struct {
	cfg    Config
	logf   func(format string, args ...any)
	auth   *auth
	http   *http.Server
	conns  *trackingListener
	active inflight // handlers running, exec sessions included
}

// Listen opens the server's TCP port. Port 0 picks a free one. A port in
// use is a clear error, not a bind message.
func Listen(address string, port int) (net.Listener, error) {
	if net.ParseIP(address) == nil {
		return nil, fmt.Errorf("node server address %q is not an IP address", address)
	}
	if port < 0 || port > 65535 {
		return nil, fmt.Errorf("node server port %d is not a TCP port", port)
	}
	addr := net.JoinHostPort(address, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return nil, fmt.Errorf("node server: %s is already in use (another kubelet or lab node?): stop it, or choose another port (0 picks a free one)", addr)
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return nil, fmt.Errorf("node server: %s is not an address of this machine", address)
	case err != nil:
		return nil, fmt.Errorf("node server: listen on %s: %w", addr, err)
	}
	return ln, nil
}

// New checks cfg and builds the server; Serve runs it.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Listener == nil:
		return nil, errors.New("node server: no listener (use Listen)")
	case cfg.Certificate == nil:
		return nil, errors.New("node server: no serving certificate")
	case cfg.Client == nil:
		return nil, errors.New("node server: no client to send SubjectAccessReviews with")
	case cfg.Pods == nil || cfg.Runtime == nil:
		return nil, errors.New("node server: Pods and Runtime are required")
	}
	if errs := validation.IsDNS1123Subdomain(cfg.NodeName); len(errs) > 0 {
		return nil, fmt.Errorf("node server: node name %q: %s", cfg.NodeName, strings.Join(errs, "; "))
	}
	clientCAs := x509.NewCertPool()
	if !clientCAs.AppendCertsFromPEM(cfg.ClientCA) {
		return nil, errors.New("node server: ClientCA holds no PEM certificate: without it no client could be verified")
	}
	logf := cfg.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	a, err := newAuth(cfg, clientCAs)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, logf: logf, auth: a, conns: &trackingListener{Listener: cfg.Listener, conns: map[*trackedConn]struct{}{}}}
	s.http = &http.Server{
		Handler: s.filter(s.routes()),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{*cfg.Certificate},
			// No certificate, or one the cluster CA did not sign: the
			// handshake fails before any HTTP is read.
			ClientAuth: tls.RequireAndVerifyClientCert,
			ClientCAs:  clientCAs,
			MinVersion: tls.VersionTLS12,
			// HTTP/1.1 only: SPDY and WebSocket upgrades are HTTP/1.1
			// (the kubelet's server does the same for its streams).
			NextProtos: []string{"http/1.1"},
		},
		ReadHeaderTimeout: 10 * time.Second,
		// The kubelet's limits (pkg/kubelet/server/server.go:200, 203).
		// Without an idle timeout (and with no ReadTimeout) a keep-alive
		// connection nobody uses stays open for ever, one file descriptor
		// each; 90 s matches http.DefaultTransport's keep-alive, as
		// upstream's comment says. 1 MiB of headers is Go's default too:
		// said here so that it does not depend on it. Upstream's 4-hour
		// ReadTimeout and WriteTimeout (:201-202) are not taken: they are
		// connection deadlines, and what they would do to an upgraded
		// stream is a question of its own.
		IdleTimeout:    90 * time.Second,
		MaxHeaderBytes: 1 << 20,
		// The http package reports refused handshakes here ("TLS handshake
		// error from …: tls: client didn't provide a certificate").
		ErrorLog: log.New(logWriter(logf), "", 0),
	}
	return s, nil
}

// Port is the port the server listens on, the one the node publishes in
// status.daemonEndpoints.kubeletEndpoint.port.
func (s *Server) Port() int { return s.cfg.Listener.Addr().(*net.TCPAddr).Port }

// Serve answers requests until ctx ends, then closes every connection —
// exec sessions and followed logs included — and returns once every
// handler has finished.
func (s *Server) Serve(ctx context.Context) error {
	served := make(chan error, 1)
	go func() { served <- s.http.ServeTLS(s.conns, "", "") }()
	select {
	case err := <-served:
		s.conns.closeAll()
		<-s.active.close()
		return fmt.Errorf("node server: %w", err)
	case <-ctx.Done():
	}
	_ = s.http.Close() // the listener and every connection still speaking HTTP
	s.conns.closeAll() // and the upgraded ones (exec, attach, port-forward) the http package let go
	<-served
	select {
	case <-s.active.close():
		return nil
	case <-time.After(30 * time.Second):
		return errors.New("node server: handlers still running 30s after stop (a runtime call that does not return?)")
	}
}

// logWriter turns the http package's error log into our log lines.
type logWriter func(format string, args ...any)

func (l logWriter) Write(p []byte) (int, error) {
	l("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// trackingListener remembers every connection it accepted until it is
// closed. http.Server.Close forgets a connection once a handler hijacks it
// for an upgrade, so exec sessions would outlive the server without this.
type trackingListener struct {
	net.Listener
	mu    sync.Mutex
	conns map[*trackedConn]struct{}
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l}
	l.mu.Lock()
	l.conns[tc] = struct{}{}
	l.mu.Unlock()
	return tc, nil
}

func (l *trackingListener) closeAll() {
	l.mu.Lock()
	conns := make([]*trackedConn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

type trackedConn struct {
	net.Conn
	l    *trackingListener
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// inflight counts running handlers. Unlike a WaitGroup it can refuse new
// ones once the server stops, so waiting for the count to reach zero
// cannot race with a request that is just starting.
type inflight struct {
	mu      sync.Mutex
	n       int
	stopped bool
	zero    chan struct{}
}

func (f *inflight) enter() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return false
	}
	f.n++
	return true
}

func (f *inflight) leave() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	if f.n == 0 && f.zero != nil {
		close(f.zero)
		f.zero = nil
	}
}

// close refuses new handlers and returns a channel closed when none runs.
func (f *inflight) close() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	ch := make(chan struct{})
	if f.n == 0 {
		close(ch)
	} else {
		f.zero = ch
	}
	return ch
}
