package virtualnode

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
)

// The one program this node runs. A container's command (plus its args)
// is interpreted here instead of being executed:
//
//	http-get [--retry-for=DURATION] [--every=DURATION] URL
//
// GET the URL until it answers 2xx, at most --retry-for long (default 0:
// one attempt), waiting --every between attempts. It is a job whose
// outcome depends on the world — it can succeed, fail in several ways,
// or run until something else happens — which is what a node has to
// report back, and it stops the moment its context is cancelled.
const program = "http-get"

// Exit codes: curl --fail's for the same failures, so they mean something
// to anyone who has scripted a health check, and a shell's for the rest.
const (
	ExitOK        = 0
	ExitOther     = 1
	ExitUsage     = 2   // a shell builtin's usage error
	ExitResolve   = 6   // curl: could not resolve host
	ExitConnect   = 7   // curl: failed to connect
	ExitHTTPError = 22  // curl --fail: HTTP status >= 400
	ExitTimeout   = 28  // curl: operation timed out
	ExitTLS       = 60  // curl: peer certificate cannot be authenticated
	ExitNotFound  = 127 // a shell: command not found
	ExitStopped   = 143 // 128+SIGTERM: what a process stopped by the kubelet usually returns
)

// attemptTimeout bounds one GET, as a probe's timeoutSeconds does.
const attemptTimeout = 10 * time.Second

// Result is how a container ended: the fields of a terminated state.
type Result struct {
	ExitCode int
	Message  string
}

// Reason is the terminated state's reason, as containerd reports it.
func (r Result) Reason() string {
	if r.ExitCode == 0 {
		return "Completed"
	}
	return "Error"
}

// Interpreter runs commands; its client trusts the system's CAs and the
// cluster's, so https://127.0.0.1:6443/readyz is verified like any site.
type Interpreter struct {
	client *http.Client
	logf   func(format string, args ...any) // one line per attempt
}

// NewInterpreter builds the HTTP client. Only the CA comes from the
// node's kubeconfig: the node's client certificate is never sent to the
// URLs pods name.
func NewInterpreter(cfg *rest.Config, logf func(string, ...any)) (*Interpreter, error) {
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		if ca, err = os.ReadFile(cfg.CAFile); err != nil {
			return nil, fmt.Errorf("cluster CA: %w", err)
		}
	}
	if len(ca) > 0 && !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("cluster CA: no certificate found in the kubeconfig's CA")
	}
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		Proxy:             http.ProxyFromEnvironment,
		DisableKeepAlives: true, // every attempt is a fresh connection, as a probe's
	}
	return &Interpreter{client: &http.Client{Transport: tr}, logf: logf}, nil
}

// Run interprets argv until it ends or ctx is cancelled (the pod is being
// stopped). It never returns before the work has stopped.
func (in *Interpreter) Run(ctx context.Context, name string, argv []string) Result {
	if len(argv) == 0 {
		return Result{ExitNotFound, "no command: this node runs only `" + program + " URL` (set command: [\"" + program + "\", \"https://…\"])"}
	}
	if argv[0] != program {
		return Result{ExitNotFound, fmt.Sprintf("%s: command not found: this node runs only `%s URL`, it has no container runtime", argv[0], program)}
	}
	fs := flag.NewFlagSet(program, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	retryFor := fs.Duration("retry-for", 0, "keep trying this long")
	every := fs.Duration("every", time.Second, "wait between attempts")
	usage := "usage: " + program + " [--retry-for=DURATION] [--every=DURATION] URL"
	if err := fs.Parse(argv[1:]); err != nil {
		return Result{ExitUsage, fmt.Sprintf("%s: %v; %s", program, err, usage)}
	}
	if fs.NArg() != 1 {
		return Result{ExitUsage, fmt.Sprintf("%s: want exactly one URL, got %d arguments; %s", program, fs.NArg(), usage)}
	}
	u, err := url.Parse(fs.Arg(0))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Result{ExitUsage, fmt.Sprintf("%s: %q is not an http(s) URL; %s", program, fs.Arg(0), usage)}
	}
	if *retryFor < 0 || *every <= 0 {
		return Result{ExitUsage, fmt.Sprintf("%s: --retry-for must be >= 0 and --every > 0; %s", program, usage)}
	}

	deadline := time.Now().Add(*retryFor)
	var last Result
	for attempt := 1; ; attempt++ {
		last = in.get(ctx, u)
		if ctx.Err() != nil {
			return Result{ExitStopped, fmt.Sprintf("stopped by the node during attempt %d (GET %s)", attempt, u)}
		}
		in.logf("%s attempt %d: %s", name, attempt, last.Message)
		if last.ExitCode == ExitOK || !time.Now().Add(*every).Before(deadline) {
			if attempt > 1 {
				last.Message = fmt.Sprintf("%s (after %d attempts)", last.Message, attempt)
			}
			return last
		}
		select {
		case <-ctx.Done():
			return Result{ExitStopped, fmt.Sprintf("stopped by the node after %d attempt(s); last: %s", attempt, last.Message)}
		case <-time.After(*every):
		}
	}
}

// get is one attempt: a 2xx answer is success, anything else a failure
// with curl's exit code for it.
func (in *Interpreter) get(ctx context.Context, u *url.URL) Result {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Result{ExitUsage, err.Error()}
	}
	req.Header.Set("User-Agent", "kubelet-labs-virtual-pod")
	resp, err := in.client.Do(req)
	if err != nil {
		code := classify(err)
		var ue *url.Error // "Get \"URL\": …": we name the URL ourselves
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return Result{code, fmt.Sprintf("GET %s: %v", u, err)}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	if len(line) > 80 {
		line = line[:80] + "…"
	}
	msg := fmt.Sprintf("GET %s: %s", u, resp.Status)
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if line != "" {
			msg += ": " + line
		}
		return Result{ExitOK, msg}
	}
	// A failure's body is left out, as the kubelet's HTTP probe does
	// (pkg/probe/http/http.go:119-121): it lands in the pod's status,
	// readable by anyone who can read the pod.
	return Result{ExitHTTPError, msg}
}

// classify maps a failed request to curl's exit code, by error type.
func classify(err error) int {
	var dns *net.DNSError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var verify *tls.CertificateVerificationError
	var netErr net.Error
	switch {
	case errors.As(err, &dns):
		return ExitResolve
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return ExitConnect
	case errors.As(err, &verify), errors.As(err, &unknownCA), errors.As(err, &hostname):
		return ExitTLS
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return ExitTimeout
	}
	return ExitOther
}
