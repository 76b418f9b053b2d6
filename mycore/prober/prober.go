package prober

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	_ "k8s.io/kubernetes/pkg/apis/core/install" // v1.Pod's kind in legacyscheme, for GenerateContainerRef
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/events"
	"k8s.io/kubernetes/pkg/kubelet/prober/results"
	"k8s.io/kubernetes/pkg/probe"
	execprobe "k8s.io/kubernetes/pkg/probe/exec"
	grpcprobe "k8s.io/kubernetes/pkg/probe/grpc"
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
	grpc   grpcprobe.Prober
	runner kubecontainer.CommandRunner
	// recorder records Unhealthy and ProbeWarning events; nil: none.
	recorder record.EventRecorder
}

func newProber(runner kubecontainer.CommandRunner, recorder record.EventRecorder) *prober {
	// false: an HTTP probe follows redirects only to the same host (:60).
	return &prober{exec: execprobe.New(), http: httpprobe.New(false), tcp: tcpprobe.New(), grpc: grpcprobe.New(),
		runner: runner, recorder: recorder}
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
	var target string
	for range maxProbeRetries { // runProbeWithRetries (:138)
		if res, target, output, err = pb.runProbe(ctx, spec, status, c, id); err == nil || ctx.Err() != nil {
			break
		}
	}
	// The events of prober.go:103-125, worded as upstream's (the e2e tests
	// look for their messages); our log lines also say what was probed.
	logged := output
	if target != "" {
		logged = target + ": " + output
	}
	switch {
	case err != nil:
		if ctx.Err() == nil {
			pb.event(pod, &c, v1.EventTypeWarning, events.ContainerUnhealthy, "%s probe errored and resulted in %s state: %s", kind.eventName(), probe.Failure, err)
		}
		return results.Failure, logged, err
	case res == probe.Success:
		return results.Success, logged, nil
	case res == probe.Warning:
		pb.event(pod, &c, v1.EventTypeWarning, events.ContainerProbeWarning, "%s probe warning: %s", kind.eventName(), output)
		return results.Success, logged, nil
	case res == probe.Failure:
		pb.event(pod, &c, v1.EventTypeWarning, events.ContainerUnhealthy, "%s probe failed: %s", kind.eventName(), output)
	}
	return results.Failure, logged, nil
}

// event is recordContainerEvent (prober.go:66-73): an event about the
// container, if there is a recorder.
func (pb *prober) event(pod *v1.Pod, c *v1.Container, eventType, reason, format string, args ...any) {
	if pb.recorder == nil {
		return
	}
	ref, err := kubecontainer.GenerateContainerRef(pod, c)
	if err != nil {
		return
	}
	pb.recorder.Eventf(ref, eventType, reason, format, args...)
}

// eventName is probeType.String (prober_manager.go:162): capitalised, as
// events say it.
func (t probeType) eventName() string {
	switch t {
	case readiness:
		return "Readiness"
	case liveness:
		return "Liveness"
	}
	return "Startup"
}

// runProbe is runProbe (prober.go:151-203): exec in the container, an
// HTTP GET, a TCP connect or a gRPC health check to the pod IP (the
// probe's host, if it names one), each bounded by timeoutSeconds. target
// says what was probed, for the log.
func (pb *prober) runProbe(ctx context.Context, p *v1.Probe, status v1.PodStatus, c v1.Container, id kubecontainer.ContainerID) (res probe.Result, target, output string, err error) {
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	switch {
	case p.Exec != nil:
		// Only the container's literal env is expanded in the command:
		// an exec probe sees no downward API (:157).
		cmd := kubecontainer.ExpandContainerCommandOnlyStatic(p.Exec.Command, c.Env)
		res, output, err = pb.exec.Probe(&execInContainer{run: func() ([]byte, error) { return pb.runner.RunInContainer(ctx, id, cmd, timeout) }})
		return res, "", output, err
	case p.HTTPGet != nil:
		req, err := httpprobe.NewRequestForHTTPGetAction(p.HTTPGet, &c, status.PodIP, "probe")
		if err != nil {
			return probe.Unknown, "", "", err
		}
		res, output, err = pb.http.Probe(req.WithContext(ctx), timeout)
		return res, "GET " + req.URL.String(), output, err
	case p.TCPSocket != nil:
		port, err := probe.ResolveContainerPort(p.TCPSocket.Port, &c)
		if err != nil {
			return probe.Unknown, "", "", err
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = status.PodIP
		}
		res, output, err = pb.tcp.Probe(host, port, timeout)
		return res, fmt.Sprintf("connect %s:%d", host, port), output, err
	case p.GRPC != nil:
		// :190-197: the standard gRPC health service, always on the pod
		// IP, in plain text (the probe has no TLS and no host).
		service := ""
		if p.GRPC.Service != nil {
			service = *p.GRPC.Service
		}
		res, output, err = pb.grpc.Probe(status.PodIP, service, int(p.GRPC.Port), timeout)
		return res, fmt.Sprintf("grpc %s:%d service %q", status.PodIP, p.GRPC.Port, service), output, err
	}
	return probe.Unknown, "", "", errors.New("probe has no exec, httpGet, tcpSocket or grpc handler")
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
