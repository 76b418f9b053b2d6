package liveview

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"io/fs"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The token travels in the URL, never in a cookie. Cookies ignore ports
// (RFC 6265 section 8.5): a cookie set by 127.0.0.1:PORT goes with every
// request the browser makes to 127.0.0.1 on any port, to whatever process
// of whichever user listens there — a dev server, another user's program
// the learner is lured to — which could replay it here. No cookie name or
// value helps: whoever receives a cookie that opens the view can send it
// to the view. So the printed URL carries the token (?token=), the page
// keeps it in sessionStorage, which is scoped to its origin (scheme, host
// and port), and passes it as a query parameter on each request for the
// node's data — EventSource cannot set a header, so a query parameter it
// is. The page itself (static/) is the course's own files, served to
// anyone who names this server: it holds nothing of the node.

// publicFiles are the paths of the page's static files, which need no
// token; every other path (the event stream, the download, any added
// later) does.
var publicFiles = func() map[string]bool {
	files := map[string]bool{"/": true}
	_ = fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files[strings.TrimPrefix(p, "static")] = true
		}
		return nil
	})
	return files
}()

func newToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// guard lets through only requests that name this server in their Host
// header — a page of another site that makes its name resolve to 127.0.0.1
// (DNS rebinding) sends its own name, and is refused — and, but for the
// page's static files, carry the token as the query parameter "token". A
// wrong token is refused on any path, so an old URL says why it fails.
// Every answer forbids scripts, styles and connections from anywhere
// else, and sends no Referer onwards (the page's URL has the token).
func (s *Server) guard(next http.Handler) http.Handler {
	port := s.ln.Addr().(*net.TCPAddr).Port
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		if !s.hostAllowed(r.Host, port) {
			http.Error(w, "live view: unknown Host "+r.Host+"; open the URL the lab printed", http.StatusMisdirectedRequest)
			return
		}
		t, given := r.URL.Query()["token"]
		switch {
		case given && (len(t) != 1 || !s.tokenOK(t[0])):
			http.Error(w, "live view: wrong token; open the URL the lab printed (a new run prints a new one)", http.StatusUnauthorized)
			return
		case !given && !publicFiles[r.URL.Path]:
			http.Error(w, "live view: open the URL the lab printed (it carries a token)", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) tokenOK(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(s.token)) == 1
}

// hostAllowed: the Host header is this server's address, by IP or as
// localhost, with its port.
func (s *Server) hostAllowed(hostport string, port int) bool {
	host, p, err := net.SplitHostPort(hostport)
	if err != nil || p != itoa(port) {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	if ip.IsLoopback() {
		return true
	}
	want, _, _ := net.SplitHostPort(s.o.Address)
	if w := net.ParseIP(want); w != nil && !w.IsUnspecified() {
		return w.Equal(ip)
	}
	return localAddress(ip) // listening on every address: any of ours
}

func itoa(n int) string { return strconv.Itoa(n) }

func localAddress(ip net.IP) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// selfSignedCertificate is a certificate for host (every address of this
// machine if host is unspecified), valid for a day: the live view off
// loopback is a workshop's projector, not a service.
func selfSignedCertificate(host string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "kubelet-labs live view"},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
	}
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		tmpl.IPAddresses = []net.IP{ip}
	} else if ip == nil && host != "" {
		tmpl.DNSNames = append(tmpl.DNSNames, host)
	} else if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				tmpl.IPAddresses = append(tmpl.IPAddresses, n.IP)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}
