package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// httpsClient verifies the server against caFile and, if certFile is set,
// presents a client certificate: every health probe is real TLS, never
// InsecureSkipVerify.
func httpsClient(caFile, certFile, keyFile string) (*http.Client, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no certificate in %s", caFile)
	}
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}, nil
}

// waitHealthy polls url until the body contains want, the process exits,
// the context ends or timeout passes. The error always names the
// component's log file.
func waitHealthy(ctx context.Context, p *process, hc *http.Client, url, want string, timeout time.Duration) error {
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	last := "no answer yet"
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := hc.Get(url)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), want) {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
		} else {
			last = err.Error()
		}
		select {
		case <-p.done:
			return p.exitError()
		case <-ctx.Done():
			return fmt.Errorf("%s: stopped waiting for %s: %w (log: %s)", p.name, url, ctx.Err(), p.logPath)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not healthy after %s at %s (last: %s); its log is %s", p.name, timeout, url, tailLines(last, 5), p.logPath)
		}
	}
}
