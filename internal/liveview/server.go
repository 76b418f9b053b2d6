package liveview

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"time"

	"kubelet-labs/mycore/journal"
)

//go:embed static
var static embed.FS

// Options configure a Server.
type Options struct {
	// Address is host:port to listen on ("127.0.0.1:0": loopback, a free
	// port). A host that is not loopback is served with TLS.
	Address string
	// Title names what is shown (e.g. "lab 18 · node mykubelet").
	Title string
	// Journal is the node's journal: its backlog first, then every entry.
	Journal *journal.Bus
	// Fleet, if set, is fleet mode's journal of node entries (one per node
	// per period) for the grid; Journal may then be nil.
	Fleet *journal.Bus
}

// Server is a running live view.
type Server struct {
	o           Options
	ln          net.Listener
	srv         *http.Server
	token       string
	url         string
	fingerprint string
	cert        *x509.Certificate
	done        chan struct{}
	cancel      context.CancelFunc
}

// Start listens on o.Address and serves until Close.
func Start(o Options) (*Server, error) {
	if o.Journal == nil && o.Fleet == nil {
		return nil, errors.New("live view: nothing to show (no journal)")
	}
	host, _, err := net.SplitHostPort(o.Address)
	if err != nil {
		return nil, fmt.Errorf("live view address %q: %w (want host:port, e.g. 127.0.0.1:0)", o.Address, err)
	}
	token, err := newToken()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", o.Address)
	if err != nil {
		return nil, fmt.Errorf("live view: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{o: o, ln: ln, token: token, done: make(chan struct{}), cancel: cancel}
	scheme := "http"
	if !isLoopback(host) {
		cert, err := selfSignedCertificate(host)
		if err != nil {
			ln.Close()
			cancel()
			return nil, err
		}
		sum := sha256.Sum256(cert.Certificate[0])
		s.fingerprint = fmt.Sprintf("%X", sum[:])
		s.cert = cert.Leaf
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
		s.ln, scheme = ln, "https"
	}
	s.url = fmt.Sprintf("%s://%s/?token=%s", scheme, urlHost(host, ln.Addr()), token)
	s.srv = &http.Server{
		Handler:           s.guard(s.routes()),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln) // ErrServerClosed after Close
	}()
	return s, nil
}

// URL is the address to open, with the token.
func (s *Server) URL() string { return s.url }

// Fingerprint is the SHA-256 of the TLS certificate ("" on loopback, which
// is plain HTTP).
func (s *Server) Fingerprint() string { return s.fingerprint }

// Certificate is the TLS certificate (nil on loopback).
func (s *Server) Certificate() *x509.Certificate { return s.cert }

// Close ends every stream and stops the server.
func (s *Server) Close() error {
	s.cancel() // event streams return
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.done
	return err
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	files, _ := fs.Sub(static, "static")
	mux.Handle("GET /", http.FileServerFS(files))
	mux.HandleFunc("GET /events", s.events)
	mux.HandleFunc("GET /trace.json", s.trace)
	return mux
}

// trace is the session so far as a Chrome trace file (journal.ChromeTrace).
func (s *Server) trace(w http.ResponseWriter, _ *http.Request) {
	entries := append(s.o.Journal.Backlog(), s.o.Fleet.Backlog()...)
	data, err := journal.ChromeTrace(entries)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	name := "kubelet"
	if n := s.o.Journal.Node(); n != "" {
		name += "-" + n
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name+"-"+time.Now().Format("20060102-150405")+".json"))
	_, _ = w.Write(data)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// urlHost is host:port for the URL: the port the listener got (":0" picks
// one), the host as given — or, listening on every address (a workshop's
// projector), this machine's first address that is not loopback, the one
// the room can reach.
func urlHost(host string, addr net.Addr) string {
	port := addr.(*net.TCPAddr).Port
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "localhost"
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
					host = n.IP.String()
					break
				}
			}
		}
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return fmt.Sprintf("%s:%d", host, port)
}
