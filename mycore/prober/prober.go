package prober

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	v1 "k8s.io/api/core/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/prober/results"
	"k8s.io/kubernetes/pkg/probe"
	execprobe "k8s.io/kubernetes/pkg/probe/exec"
	httpprobe "k8s.io/kubernetes/pkg/probe/http"
	tcpprobe "k8s.io/kubernetes/pkg/probe/tcp"
	utilexec "k8s.io/utils/exec"
)

// maxProbeRetries (prober.go:42): a probe that could not run is tried
// again at once, up to three times, before the error counts.
const maxProbeRetries = 3

// prober runs one probe with the kubelet's own probers (prober.go:45-52).
type prober struct {
	exec   execprobe.Prober
	http   httpprobe.Prober
	tcp    tcpprobe.Prober
	runner kubecontainer.CommandRunner
}

func newProber(runner kubecontainer.CommandRunner) *prober {
	// false: an HTTP probe follows redirects only to the same host (:60).
	return &prober{exec: execprobe.New(), http: httpprobe.New(false), tcp: tcpprobe.New(), runner: runner}
}

// probe is probe (prober.go:83-134): Success or Failure, the probe's
// output, and an error if the probe could not run at all. A warning (an
// HTTP redirect to another host) counts as success; an unknown result as
// failure.
func (pb *prober) probe(ctx context.Context, kind probeType, pod *v1.Pod, status v1.PodStatus, c v1.Container, id kubecontainer.ContainerID) (results.Result, string, error) {
	var spec *v1.Probe
	switch kind {
	case liveness:
		spec = c.LivenessProbe
	case readiness:
		spec = c.ReadinessProbe
	case startup:
		spec = c.StartupProbe
	}
	var (
		res    probe.Result
		output string
		err    error
	)
	for range maxProbeRetries { // runProbeWithRetries (:138)
		if res, output, err = pb.runProbe(ctx, spec, status, c, id); err == nil || ctx.Err() != nil {
			break
		}
	}
	switch {
	case err != nil:
		return results.Failure, output, err
	case res == probe.Success || res == probe.Warning:
		return results.Success, output, nil
	}
	return results.Failure, output, nil
}

// runProbe is runProbe (prober.go:151-203): exec in the container, or an
// HTTP GET or a TCP connect to the pod IP (the probe's host, if it names
// one), each bounded by timeoutSeconds.
func (pb *prober) runProbe(ctx context.Context, p *v1.Probe, status v1.PodStatus, c v1.Container, id kubecontainer.ContainerID) (probe.Result, string, error) {
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	switch {
	case p.Exec != nil:
		// Only the container's literal env is expanded in the command:
		// an exec probe sees no downward API (:157).
		cmd := kubecontainer.ExpandContainerCommandOnlyStatic(p.Exec.Command, c.Env)
		return pb.exec.Probe(&execInContainer{run: func() ([]byte, error) { return pb.runner.RunInContainer(ctx, id, cmd, timeout) }})
	case p.HTTPGet != nil:
		req, err := httpprobe.NewRequestForHTTPGetAction(p.HTTPGet, &c, status.PodIP, "probe")
		if err != nil {
			return probe.Unknown, "", err
		}
		res, out, err := pb.http.Probe(req.WithContext(ctx), timeout)
		return res, fmt.Sprintf("GET %s: %s", req.URL, out), err
	case p.TCPSocket != nil:
		port, err := probe.ResolveContainerPort(p.TCPSocket.Port, &c)
		if err != nil {
			return probe.Unknown, "", err
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = status.PodIP
		}
		res, out, err := pb.tcp.Probe(host, port, timeout)
		return res, fmt.Sprintf("connect %s:%d: %s", host, port, out), err
	}
	return probe.Unknown, "", errors.New("probe has no exec, httpGet or tcpSocket handler (gRPC probes are not supported on this node)")
}

// execInContainer is the exec prober's adapter (prober.go:205-281): the
// exec prober wants a utilexec.Cmd; this one runs the command with CRI
// ExecSync instead of on the host. Its Start returns what ExecSync
// returned: nil (exit 0), a CodeExitError (exit non-zero: Failure), or
// cri-client's ErrCommandTimedOut (the runtime ended the command at
// timeoutSeconds: Failure too).
type execInContainer struct {
	run    func() ([]byte, error)
	writer io.Writer
}

var _ utilexec.Cmd = (*execInContainer)(nil)

func (e *execInContainer) Start() error {
	data, err := e.run()
	if e.writer != nil {
		_, _ = e.writer.Write(data) // the exec prober keeps the first 10 KiB
	}
	return err
}

func (e *execInContainer) Wait() error                     { return nil }
func (e *execInContainer) Run() error                      { return nil }
func (e *execInContainer) CombinedOutput() ([]byte, error) { return e.run() }
func (e *execInContainer) Output() ([]byte, error)         { return nil, errors.New("unimplemented") }
func (e *execInContainer) SetDir(string)                   {}
func (e *execInContainer) SetStdin(io.Reader)              {}
func (e *execInContainer) SetStdout(out io.Writer)         { e.writer = out }
func (e *execInContainer) SetStderr(out io.Writer)         { e.writer = out }
func (e *execInContainer) SetEnv([]string)                 {}
func (e *execInContainer) Stop()                           {}
func (e *execInContainer) StdoutPipe() (io.ReadCloser, error) {
	return nil, errors.New("unimplemented")
}
func (e *execInContainer) StderrPipe() (io.ReadCloser, error) {
	return nil, errors.New("unimplemented")
}
