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

// waitHealthy polls url until the body contains want, the process exits or
// the context ends. timeout is how long it waits without progress: each
// check that turns ok (fewer "[-]" lines in /readyz's answer, or a first
// answer at all) starts it again, so a slow machine — QEMU without KVM runs
// the apiserver's start-up hooks for minutes — is waited for while it gets
// somewhere, and a stuck component still fails after timeout; never longer
// than maxWaitFactor times timeout in all. The error names the checks still
// failing and the component's log file.
func waitHealthy(ctx context.Context, p *process, hc *http.Client, url, want string, timeout time.Duration) error {
	defer hc.CloseIdleConnections()
	start := time.Now()
	progress := start
	last := "no answer yet"
	failing := -1 // checks failing in the last answer; -1: none yet
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := hc.Get(url)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 8192))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), want) {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
			if n := strings.Count(string(body), "[-]"); failing < 0 || n < failing {
				failing = n
				progress = time.Now()
			}
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
		if now := time.Now(); now.Sub(progress) > timeout || now.Sub(start) > maxWaitFactor*timeout {
			return fmt.Errorf("%s not healthy after %s at %s, no check turning ok for %s (last: %s); its log is %s",
				p.name, now.Sub(start).Round(time.Second), url, timeout, failedChecks(last), p.logPath)
		}
	}
}

// maxWaitFactor bounds waitHealthy however slowly the checks turn ok.
const maxWaitFactor = 8

// failedChecks keeps the "[-]" lines of a /readyz or /healthz answer (the
// checks still failing), or the last 5 lines when there are none.
func failedChecks(answer string) string {
	var failed []string
	for _, l := range strings.Split(answer, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "[-]") {
			failed = append(failed, strings.TrimSpace(l))
		}
	}
	if len(failed) == 0 {
		return tailLines(answer, 5)
	}
	return strings.Join(failed, "; ")
}
